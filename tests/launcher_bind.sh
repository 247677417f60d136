#!/bin/sh
# The binding service on replayed machines: fake sysfs trees (TP_SYSFS_ROOT) with NVIDIA and AMD GPUs, HCAs and
# other PCI functions, and hwloc XML topologies (HWLOC_XMLFILE), so binding is computed and reported, not applied.
# Checks each rank's GPU variables and TP_BIND_* exactly, and every bad input refused by name.
. "$(dirname "$0")/launcher_lib.sh"

XML="$(cd "$(dirname "$0")" && pwd)/bind"
unset TP_GPUS TP_GPUS_PER_RANK TP_BIND_TO TP_SYSFS_ROOT HWLOC_XMLFILE CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES
host=$(hostname)
own=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)

# pci ROOT BDF VENDOR CLASS NUMA: a PCI function where sysfs has it, and its bus/pci/devices link.
pci() {
    d="$1/devices/pci${2%:*.*}/$2"
    mkdir -p "$d" "$1/bus/pci/devices"
    echo "$3" >"$d/vendor"
    echo "$4" >"$d/class"
    echo "$5" >"$d/numa_node"
    ln -s "../../../devices/pci${2%:*.*}/$2" "$1/bus/pci/devices/$2"
}
# hca ROOT NAME BDF NUMA: a Mellanox function and its class/infiniband entry.
hca() {
    pci "$1" "$3" 0x15b3 0x020700 "$4"
    mkdir -p "$1/class/infiniband/$2"
    ln -s "../../../devices/pci${3%:*.*}/$3" "$1/class/infiniband/$2/device"
}

# A: four NVIDIA GPUs, two per NUMA node, beside functions that are not GPUs (audio, a switch, a NIC).
A="$T/a"
pci "$A" 0000:b1:00.0 0x10de 0x030000 1
pci "$A" 0000:1b:00.0 0x10de 0x030200 0
pci "$A" 0000:1b:00.1 0x10de 0x040300 0
pci "$A" 0000:8a:00.0 0x10de 0x030200 1
pci "$A" 0000:86:00.0 0x10de 0x068000 1
pci "$A" 0000:5e:00.0 0x8086 0x020000 0
pci "$A" 0000:3b:00.0 0x10de 0x030200 0
# B: two AMD GPUs (a display and a processing accelerator) and an AMD audio function.
B="$T/b"
pci "$B" 0000:c1:00.0 0x1002 0x038000 1
pci "$B" 0000:41:00.0 0x1002 0x120000 0
pci "$B" 0000:c1:00.1 0x1002 0x040300 1
# C: a VM: the firmware gives no NUMA node.
C="$T/c"
pci "$C" 0000:00:04.0 0x10de 0x030200 -1
# D: 8 GPUs, two per NUMA node, and 4 HCAs each on another node than the GPUs beside them.
D="$T/d"
i=0
for b in 18 2a 3a 5d 9a ab ba db; do
    pci "$D" "0000:$b:00.0" 0x10de 0x030200 $((i / 2))
    i=$((i + 1))
done
hca "$D" mlx5_0 0000:19:00.0 1
hca "$D" mlx5_1 0000:3b:00.0 0
hca "$D" mlx5_2 0000:9b:00.0 3
hca "$D" mlx5_3 0000:bb:00.0 2

# run ROOT XML [tprun args...]: the ranks print their binding into $T/out; $st is tprun's status.
run() {
    root=$1 xml=$2
    shift 2
    TP_SYSFS_ROOT=$root HWLOC_XMLFILE=$XML/$xml "$TPRUN" "$@" "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
    st=$?
}
get() { sed -n "s/^$1 $2=//p" "$T/out"; }
NA=" (not applied: the topology is not this machine's)"

# expect R CUDA BUS CPUS NUMA WHY: one rank's variables (CUDA_DEVICE_ORDER with a GPU), and nothing applied.
expect() {
    expect_eq "$what: rank $1 CUDA_VISIBLE_DEVICES" "$(get "$1" CUDA_VISIBLE_DEVICES)" "$2"
    [ "$3" = "<unset>" ] || expect_eq "$what: rank $1 CUDA_DEVICE_ORDER" "$(get "$1" CUDA_DEVICE_ORDER)" PCI_BUS_ID
    expect_eq "$what: rank $1 TP_GPU_BUS_ID" "$(get "$1" TP_GPU_BUS_ID)" "$3"
    expect_eq "$what: rank $1 TP_BIND_CPUS" "$(get "$1" TP_BIND_CPUS)" "$4"
    expect_eq "$what: rank $1 TP_BIND_NUMA" "$(get "$1" TP_BIND_NUMA)" "$5"
    expect_eq "$what: rank $1 TP_BIND_WHY" "$(get "$1" TP_BIND_WHY)" "$6"
    expect_eq "$what: rank $1 not bound by the kernel" "$(get "$1" cpus) $(get "$1" mem)" "$own default"
}
expect_ok() {
    expect_eq "$what: status" "$st" 0
    [ -s "$T/err" ] && fail "$what: stderr: $(cat "$T/err")"
}

what="4 GPUs, -n 4"
run "$A" two_numa_smt.xml -n 4
expect_ok
expect 0 0 0000:1b:00.0 0-3,8-11 0 "nearest GPU 0000:1b:00.0$NA"
expect 1 1 0000:3b:00.0 0-3,8-11 0 "nearest GPU 0000:3b:00.0$NA"
expect 2 2 0000:8a:00.0 4-7,12-15 1 "nearest GPU 0000:8a:00.0$NA"
expect 3 3 0000:b1:00.0 4-7,12-15 1 "nearest GPU 0000:b1:00.0$NA"

what="4 GPUs, --bind-to core"
run "$A" two_numa_smt.xml -n 4 --bind-to core
expect_ok
expect 0 0 0000:1b:00.0 0,8 0 "nearest GPU 0000:1b:00.0, core L#0$NA"
expect 1 1 0000:3b:00.0 1,9 0 "nearest GPU 0000:3b:00.0, core L#1$NA"
expect 2 2 0000:8a:00.0 4,12 1 "nearest GPU 0000:8a:00.0, core L#4$NA"
expect 3 3 0000:b1:00.0 5,13 1 "nearest GPU 0000:b1:00.0, core L#5$NA"

what="CUDA_VISIBLE_DEVICES=3,1"
CUDA_VISIBLE_DEVICES=3,1 run "$A" two_numa_smt.xml -n 2
expect_ok
expect 0 3 0000:b1:00.0 4-7,12-15 1 "nearest GPU 0000:b1:00.0$NA"
expect 1 1 0000:3b:00.0 0-3,8-11 0 "nearest GPU 0000:3b:00.0$NA"

what="TP_GPUS bus ids over CUDA_VISIBLE_DEVICES"
TP_GPUS=0000:8a:00.0,1B:00.0 CUDA_VISIBLE_DEVICES=0 run "$A" two_numa_smt.xml -n 2
expect_ok
expect 0 2 0000:8a:00.0 4-7,12-15 1 "nearest GPU 0000:8a:00.0$NA"
expect 1 0 0000:1b:00.0 0-3,8-11 0 "nearest GPU 0000:1b:00.0$NA"

what="TP_GPUS indexes, -x"
run "$A" two_numa_smt.xml -n 2 -x TP_GPUS=3,0 --bind-to numa
expect_ok
expect 0 3 0000:b1:00.0 4-7,12-15 1 "nearest GPU 0000:b1:00.0$NA"
expect 1 0 0000:1b:00.0 0-3,8-11 0 "nearest GPU 0000:1b:00.0$NA"

what="--bind-to none"
run "$A" two_numa_smt.xml -n 1 --bind-to none
expect_ok
expect 0 0 0000:1b:00.0 "$own" - "--bind-to none"

# No GPU or HCA: each rank takes its share of the 8 cores (1, 2, 1, 2, 2 of them), its memory left to the kernel.
what="--gpus-per-rank 0"
CUDA_VISIBLE_DEVICES=1 run "$A" two_numa_smt.xml -n 5 --gpus-per-rank 0
expect_ok
NO="no GPU or HCA to bind near"
expect 0 1 "<unset>" 0,8 - "$NO: core L#0 by local rank$NA"
expect 1 1 "<unset>" 1-2,9-10 - "$NO: cores L#1-L#2 by local rank$NA"
expect 2 1 "<unset>" 3,11 - "$NO: core L#3 by local rank$NA"
expect 4 1 "<unset>" 6-7,14-15 - "$NO: cores L#6-L#7 by local rank$NA"
what="TP_GPUS_PER_RANK=0" # the same from the environment
CUDA_VISIBLE_DEVICES=1 TP_GPUS_PER_RANK=0 run "$A" two_numa_smt.xml -n 5
expect_ok
expect 0 1 "<unset>" 0,8 - "$NO: core L#0 by local rank$NA"
expect 4 1 "<unset>" 6-7,14-15 - "$NO: cores L#6-L#7 by local rank$NA"
what="--gpus-per-rank 0, one rank"
run "$A" two_numa_smt.xml -n 1 --gpus-per-rank 0
expect_ok
expect 0 "<unset>" "<unset>" "$own" - "$NO: not bound"

# More ranks than cores and nothing to bind near: the cores in turn (ranks 8 and 9 join 0 and 1), memory left to
# the kernel; with --bind-to core memory goes with the core. Left free, 3 of 4 ranks on 2 vCPUs can stay on one.
what="oversubscribed, no GPU or HCA"
run "$A" two_numa_smt.xml -n 10 --gpus-per-rank 0
expect_ok
OVER=" (oversubscribed: 10 ranks for 8 cores)"
expect 0 "<unset>" "<unset>" 0,8 - "$NO: core L#0 in turn by local rank$OVER$NA"
expect 7 "<unset>" "<unset>" 7,15 - "$NO: core L#7 in turn by local rank$OVER$NA"
expect 8 "<unset>" "<unset>" 0,8 - "$NO: core L#0 in turn by local rank$OVER$NA"
expect 9 "<unset>" "<unset>" 1,9 - "$NO: core L#1 in turn by local rank$OVER$NA"
what="oversubscribed, --bind-to core"
run "$A" two_numa_smt.xml -n 10 --gpus-per-rank 0 --bind-to core
expect_ok
expect 5 "<unset>" "<unset>" 5,13 1 "core L#5 in turn by local rank$OVER$NA"
expect 9 "<unset>" "<unset>" 1,9 0 "core L#1 in turn by local rank$OVER$NA"

what="oversubscribed"
run "$A" two_numa_smt.xml -n 10 --gpus-per-rank 0 --bind-to numa
expect_ok
expect 0 "<unset>" "<unset>" "$own" - "oversubscribed: not bound (5 ranks for 4 cores, NUMA node 0 by local rank)"
expect 9 "<unset>" "<unset>" "$own" - "oversubscribed: not bound (5 ranks for 4 cores, NUMA node 1 by local rank)"

what="AMD GPUs"
CUDA_VISIBLE_DEVICES=0 run "$B" two_numa_smt.xml -n 2 -x HIP_VISIBLE_DEVICES=1,0
expect_ok
for r in 0 1; do
    expect_eq "$what: rank $r HIP_VISIBLE_DEVICES" "$(get $r HIP_VISIBLE_DEVICES)" 0
    expect_eq "$what: rank $r CUDA_VISIBLE_DEVICES (HIP would read it)" "$(get $r CUDA_VISIBLE_DEVICES)" "<unset>"
done
expect_eq "$what: rank 0 ROCR_VISIBLE_DEVICES" "$(get 0 ROCR_VISIBLE_DEVICES)" 1
expect_eq "$what: rank 0 TP_GPU_BUS_ID" "$(get 0 TP_GPU_BUS_ID)" 0000:c1:00.0
expect_eq "$what: rank 0 TP_BIND_NUMA" "$(get 0 TP_BIND_NUMA)" 1
expect_eq "$what: rank 1 ROCR_VISIBLE_DEVICES" "$(get 1 ROCR_VISIBLE_DEVICES)" 0
expect_eq "$what: rank 1 TP_GPU_BUS_ID" "$(get 1 TP_GPU_BUS_ID)" 0000:41:00.0
ROCR_VISIBLE_DEVICES=1 CUDA_VISIBLE_DEVICES=0 run "$B" two_numa_smt.xml -n 1
expect_eq "ROCR_VISIBLE_DEVICES=1 and HIP's CUDA_VISIBLE_DEVICES=0 of what it leaves" \
    "$st $(get 0 ROCR_VISIBLE_DEVICES) $(get 0 TP_GPU_BUS_ID)" "0 1 0000:c1:00.0"

what="VM"
run "$C" two_numa_smt.xml -n 1
expect_ok
expect 0 0 0000:00:04.0 "$own" - "GPU's NUMA node unknown (VM): not bound"

what="8 GPUs, 4 HCAs"
run "$D" four_numa.xml -n 8
expect_ok
for r in 0 1 2 3 4 5 6 7; do
    n=$((r / 2))
    bus=$(echo 18 2a 3a 5d 9a ab ba db | cut -d' ' -f$((r + 1)))
    expect $r $r "0000:$bus:00.0" "$((4 * n))-$((4 * n + 3))" $n "nearest GPU 0000:$bus:00.0$NA"
done
what="8 GPUs, --bind-to core"
run "$D" four_numa.xml -n 8 --bind-to core
expect_ok
expect 0 0 0000:18:00.0 0 0 "nearest GPU 0000:18:00.0, core L#0$NA"
expect 3 3 0000:5d:00.0 5 1 "nearest GPU 0000:5d:00.0, core L#5$NA"
expect 7 7 0000:db:00.0 13 3 "nearest GPU 0000:db:00.0, core L#13$NA"
what="no GPU: the HCA's node"
run "$D" four_numa.xml -n 5 --gpus-per-rank 0
expect_ok
expect 0 "<unset>" "<unset>" 4-7 1 "nearest HCA mlx5_0$NA"
expect 1 "<unset>" "<unset>" 0-3 0 "nearest HCA mlx5_1$NA"
expect 2 "<unset>" "<unset>" 12-15 3 "nearest HCA mlx5_2$NA"
expect 3 "<unset>" "<unset>" 8-11 2 "nearest HCA mlx5_3$NA"
expect 4 "<unset>" "<unset>" 4-7 1 "nearest HCA mlx5_0$NA"

# refuse WHAT MESSAGE ENV... -- TPRUN-ARGS: exit 2, that one line, and no rank started.
refuse() {
    what=$1 msg=$2
    shift 2
    envs=
    while [ "$1" != "--" ]; do envs="$envs $1" && shift; done
    shift
    env $envs TP_SYSFS_ROOT="$A" HWLOC_XMLFILE="$XML/two_numa_smt.xml" "$TPRUN" "$@" "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
    expect_eq "$what: status" "$?" 2
    expect_eq "$what: message" "$(cat "$T/err")" "tprun: $msg"
    [ -s "$T/out" ] && fail "$what: a rank ran"
}
refuse "5 ranks, 4 GPUs" "host $host: 5 ranks but 4 GPUs (all GPUs): start at most 4 ranks there, or give --gpus-per-rank 0 to start them without a GPU each" -- -n 5
refuse "3 ranks, 2 visible" "host $host: 3 ranks but 2 GPUs (CUDA_VISIBLE_DEVICES=0,2): start at most 2 ranks there, or give --gpus-per-rank 0 to start them without a GPU each" CUDA_VISIBLE_DEVICES=0,2 -- -n 3
refuse "--bind-to socket" '--bind-to: expected gpu, numa, core or none, got "socket"' -- -n 1 --bind-to socket
refuse "TP_BIND_TO" 'TP_BIND_TO: expected gpu, numa, core or none, got "Core"' TP_BIND_TO=Core -- -n 1
refuse "--gpus-per-rank 2" '--gpus-per-rank: expected 0 (no GPU per rank) or 1, got "2"' -- -n 1 --gpus-per-rank 2
refuse "TP_GPUS_PER_RANK=2" 'TP_GPUS_PER_RANK: expected 0 (no GPU per rank) or 1, got "2"' TP_GPUS_PER_RANK=2 -- -n 1
refuse "TP_GPUS_PER_RANK=0, --gpus-per-rank 1" "host $host: 5 ranks but 4 GPUs (all GPUs): start at most 4 ranks there, or give --gpus-per-rank 0 to start them without a GPU each" TP_GPUS_PER_RANK=0 -- -n 5 --gpus-per-rank 1
refuse "TP_GPUS=zz" 'TP_GPUS="zz": expected comma-separated PCI bus ids (0000:3b:00.0) or GPU indexes' TP_GPUS=zz -- -n 1
refuse "TP_GPUS=1," 'TP_GPUS="1,": expected comma-separated PCI bus ids (0000:3b:00.0) or GPU indexes' TP_GPUS=1, -- -n 1
refuse "TP_GPUS=4" 'TP_GPUS="4": index 4, but this host has 4 GPUs (indexes from 0, in bus id order)' TP_GPUS=4 -- -n 1
refuse "TP_GPUS twice" 'TP_GPUS="0,1b:00.0": GPU 0000:1b:00.0 is given twice' TP_GPUS=0,1b:00.0 -- -n 1
refuse "TP_GPUS absent bus id" 'TP_GPUS="0000:99:00.0": no GPU 0000:99:00.0 on this host (4 GPUs, the first 0000:1b:00.0)' TP_GPUS=0000:99:00.0 -- -n 1
refuse "-x TP_GPUS" 'TP_GPUS="8": index 8, but this host has 4 GPUs (indexes from 0, in bus id order)' -- -n 1 -x TP_GPUS=8
refuse "CUDA UUID" 'CUDA_VISIBLE_DEVICES="GPU-8f3c2a": tprun chooses GPUs by PCI bus id and cannot map UUIDs to them; give indexes, or TP_GPUS=bus ids, or --gpus-per-rank 0 to pass it to the ranks as it is' CUDA_VISIBLE_DEVICES=GPU-8f3c2a -- -n 1
refuse "CUDA index" 'CUDA_VISIBLE_DEVICES="0,9": index 9, but this host has 4 NVIDIA GPUs' CUDA_VISIBLE_DEVICES=0,9 -- -n 1
refuse "CUDA not a list" 'CUDA_VISIBLE_DEVICES="1,x": expected comma-separated GPU indexes such as 0,1' CUDA_VISIBLE_DEVICES=1,x -- -n 1
refuse "CUDA twice" 'CUDA_VISIBLE_DEVICES="1,1": index 1 is given twice' CUDA_VISIBLE_DEVICES=1,1 -- -n 1
refuse "-x CUDA" 'CUDA_VISIBLE_DEVICES="7": index 7, but this host has 4 NVIDIA GPUs' -- -n 1 -x CUDA_VISIBLE_DEVICES=7
# The AMD host's variables.
TP_SYSFS_ROOT="$B" HWLOC_XMLFILE="$XML/two_numa_smt.xml" ROCR_VISIBLE_DEVICES=1 HIP_VISIBLE_DEVICES=1 \
    "$TPRUN" -n 1 "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
expect_eq "HIP past ROCR: status" "$?" 2
expect_eq "HIP past ROCR: message" "$(cat "$T/err")" \
    'tprun: HIP_VISIBLE_DEVICES="1": index 1, but this host has 1 AMD GPUs left by ROCR_VISIBLE_DEVICES'
TP_SYSFS_ROOT="$B" HWLOC_XMLFILE="$XML/two_numa_smt.xml" ROCR_VISIBLE_DEVICES=GPU-1234 \
    "$TPRUN" -n 1 "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
expect_eq "ROCR UUID: status" "$?" 2
echo garbage >"$T/bad.xml"
TP_SYSFS_ROOT="$A" HWLOC_XMLFILE="$T/bad.xml" "$TPRUN" -n 1 "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
expect_eq "bad HWLOC_XMLFILE: status" "$?" 2
expect_eq "bad HWLOC_XMLFILE: message" "$(cat "$T/err")" \
    "tprun: HWLOC_XMLFILE=$T/bad.xml: hwloc cannot load it as a topology (Invalid argument)"
# A vendor's variable where the host has none of its GPUs changes nothing.
HIP_VISIBLE_DEVICES=5 ROCR_VISIBLE_DEVICES=x run "$A" two_numa_smt.xml -n 1
expect_eq "AMD variables on an NVIDIA host: status, GPU" "$st $(get 0 TP_GPU_BUS_ID)" "0 0000:1b:00.0"
finish
