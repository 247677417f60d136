# topo_lib.sh: fake sysfs trees for the topology tests, made from a few lines per machine (sourced).
# Machines are directories under $ROOTS, one per host name; tests/topo_rank.sh points each rank's TP_SYSFS_ROOT at
# its host's and gives it the GPU listed for its local rank.

# ---- running ranks on them (after runtime_lib.sh): hosts are agents on this machine, started by fake_ssh.sh ----
# A test over namespace hosts sets TOPO_SSH (its ssh) and TOPO_IN (the command that runs tprun on host a).
TOPO_SSH=${TOPO_SSH:-$(cd "$(dirname "$0")" && pwd)/fake_ssh.sh}
TOPO_IN=${TOPO_IN:-}
TOPO_RANK="$(cd "$(dirname "$0")" && pwd)/topo_rank.sh"
ROOTS=${ROOTS:-$TEST_DIR/roots}
CPUS=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status) # what an unbound rank reports

# job NAME HOSTS [tprun options...]: ranks on HOSTS print their NCCL_IB_* after tp_init; the output in $out.
job() {
    local name=$1 hosts=$2
    shift 2
    step "$name (-H $hosts)"
    out=$($TOPO_IN timeout 30 "$TPRUN" --ssh "$TOPO_SSH" --report-bindings "$@" -H "$hosts" \
        "$TOPO_RANK" "$ROOTS" "$RANK_PROG" nccl-env 2>&1)
    st=$?
    [ $st = 0 ] || fail "$name: status $st: $out"
}
# has NAME LINE...: each LINE is exactly a line of $out (fixed strings).
has() {
    local name=$1 l ok=1
    shift
    for l in "$@"; do echo "$out" | grep -qxF -- "$l" || { fail "$name: no line \"$l\" in:"$'\n'"$out"; ok=0; }; done
    [ $ok = 1 ] && pass "$name"
}
# hasnt NAME PATTERN: no line of $out matches.
hasnt() { echo "$out" | grep -q -- "$2" && fail "$1: a line /$2/ in: $out" || pass "$1"; }
# table NAME LINE...: each LINE is a line of rank 0's report with its prefix and runs of blanks squeezed.
table() {
    local name=$1 l ok=1 t
    shift
    t=$(echo "$out" | sed -n 's/^tp rank 0 ([^)]*) bindings: //p' | tr -s ' ')
    for l in "$@"; do echo "$t" | grep -qxF -- "$l" || { fail "$name: no report line \"$l\" in:"$'\n'"$t"; ok=0; }; done
    [ $ok = 1 ] && pass "$name"
}

# ---- the machines ----

# mapped IP: the IPv4-mapped GID text of an address.
mapped() {
    local IFS=. a b c d
    read -r a b c d <<<"$1"
    printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d"
}

# pci HOST PATH: a PCI device (its directory under devices/).
pci() { mkdir -p "$ROOTS/$1/devices/$2"; }

# gpu HOST BUSID PATH: a GPU at a PCI path (…/BUSID); hosts list their GPUs by local rank in gpus.
gpu() {
    pci "$1" "$3"
    mkdir -p "$ROOTS/$1/bus/pci/devices"
    ln -sfn "../../../devices/$3" "$ROOTS/$1/bus/pci/devices/$2"
    echo "$2" >>"$ROOTS/$1/gpus"
}

# hca HOST NAME PATH: an RDMA device at a PCI path.
hca() {
    pci "$1" "$3"
    mkdir -p "$ROOTS/$1/class/infiniband/$2"
    ln -sfn "../../../devices/$3" "$ROOTS/$1/class/infiniband/$2/device"
}

# port HOST HCA PORT STATE LINK_LAYER: STATE as sysfs writes it ("4: ACTIVE", "1: DOWN").
port() {
    local d=$ROOTS/$1/class/infiniband/$2/ports/$3
    mkdir -p "$d/gids" "$d/gid_attrs/types" "$d/gid_attrs/ndevs"
    echo "$4" >"$d/state"
    echo "$5" >"$d/link_layer"
}

# gid HOST HCA PORT INDEX GID TYPE NETDEV: one GID table entry; GID an IPv4 address (mapped here) or GID text;
# TYPE or NETDEV "-": unreadable, as the kernel's EINVAL for an entry without them.
gid() {
    local d=$ROOTS/$1/class/infiniband/$2/ports/$3 g=$5
    case $g in *.*.*.*) g=$(mapped "$g") ;; esac
    echo "$g" >"$d/gids/$4"
    rm -rf "$d/gid_attrs/types/$4" "$d/gid_attrs/ndevs/$4" # an entry rewritten: the address moved
    if [ "$6" = - ]; then mkdir -p "$d/gid_attrs/types/$4"; else echo "$6" >"$d/gid_attrs/types/$4"; fi
    if [ "$7" = - ]; then mkdir -p "$d/gid_attrs/ndevs/$4"; else echo "$7" >"$d/gid_attrs/ndevs/$4"; fi
}

# roce HOST HCA PORT NETDEV IP [FIRST]: an active RoCE port with a GID table as the kernel fills it for one address:
# the link-local pair at 0 and 1 (v1, v2), then the address as v1 and v2 (at FIRST, FIRST+1; default 2).
roce() {
    local f=${6:-2}
    port "$1" "$2" "$3" "4: ACTIVE" Ethernet
    gid "$1" "$2" "$3" 0 fe80:0000:0000:0000:0a00:00ff:fe00:0001 "IB/RoCE v1" "$4"
    gid "$1" "$2" "$3" 1 fe80:0000:0000:0000:0a00:00ff:fe00:0001 "RoCE v2" "$4"
    gid "$1" "$2" "$3" "$f" "$5" "IB/RoCE v1" "$4"
    gid "$1" "$2" "$3" $((f + 1)) "$5" "RoCE v2" "$4"
}

# empty_gids HOST HCA PORT FROM TO: zero entries whose attributes the kernel cannot give.
empty_gids() {
    local i
    for i in $(seq "$4" "$5"); do gid "$1" "$2" "$3" "$i" 0000:0000:0000:0000:0000:0000:0000:0000 - -; done
}

# seed_pair: two hosts as in seed 001, each with rocep1s0f0, rocep1s0f1, roceP2p1s0f0 and roceP2p1s0f1 (PCI
# domains 0 and 2), only some cabled, every link on its own /24; a third host c shares only a's rocep1s0f0 switch.
seed_pair() {
    local h
    for h in a b c; do
        hca $h rocep1s0f0 pci0000:00/0000:00:01.0/0000:01:00.0
        hca $h rocep1s0f1 pci0000:00/0000:00:01.0/0000:01:00.1
        hca $h roceP2p1s0f0 pci0002:00/0002:00:01.0/0002:01:00.0
        hca $h roceP2p1s0f1 pci0002:00/0002:00:01.0/0002:01:00.1
    done
    # a: its GPU behind domain 2's bridge, so the P2 ports are nearest it.
    gpu a 0002:02:00.0 pci0002:00/0002:00:02.0/0002:02:00.0
    roce a rocep1s0f0 1 enp1s0f0np0 192.168.50.1
    roce a rocep1s0f1 1 enp1s0f1np1 10.1.1.1
    port a roceP2p1s0f0 1 "1: DOWN" Ethernet
    roce a roceP2p1s0f1 1 enP2p1s0f1np1 10.2.1.1
    # b: no GPU known; its f0 ports are up on /24s nobody else has.
    roce b rocep1s0f0 1 enp1s0f0np0 172.16.5.2
    roce b rocep1s0f1 1 enp1s0f1np1 10.1.1.2
    roce b roceP2p1s0f0 1 enP2p1s0f0np0 10.9.9.2
    roce b roceP2p1s0f1 1 enP2p1s0f1np1 10.2.1.2
    # c: only rocep1s0f0, on a's 192.168.50.0/24.
    roce c rocep1s0f0 1 enp1s0f0np0 192.168.50.3
    port c rocep1s0f1 1 "1: DOWN" Ethernet
    port c roceP2p1s0f0 1 "1: DOWN" Ethernet
    port c roceP2p1s0f1 1 "1: DOWN" Ethernet
}

# server HOST N: 8 GPUs and 8 HCAs (mlx5_0..7), four on each of two root complexes, GPU i and mlx5_i behind one
# switch; rail i is 10.10.i.0/24, where this host is .N.
server() {
    local i rc
    for i in 0 1 2 3 4 5 6 7; do
        if [ $i -lt 4 ]; then rc=0000:00; else rc=0000:80; fi
        gpu "$1" "0000:${i}1:00.0" "pci$rc/${rc}:0$i.0/0000:${i}0:00.0/0000:${i}1:00.0"
        hca "$1" "mlx5_$i" "pci$rc/${rc}:0$i.0/0000:${i}0:00.0/0000:${i}2:00.0"
        roce "$1" "mlx5_$i" 1 "eth$i" "10.10.$i.$2"
    done
}
