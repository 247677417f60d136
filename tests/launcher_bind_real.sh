#!/bin/sh
# The binding service on this machine: --bind-to core and numa bind for real (the ranks read their CPUs from
# /proc/self/status and their memory policy from the kernel), within tprun's own CPUs; oversubscribed, none and
# the default leave ranks alone. Then the ssh agents' path: each host's agent gives its own ranks their GPUs.
. "$(dirname "$0")/launcher_lib.sh"

unset TP_GPUS TP_GPUS_PER_RANK TP_BIND_TO TP_SYSFS_ROOT HWLOC_XMLFILE CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES
# No GPU or HCA here: a replayed empty sysfs, so a machine that has them binds by the rules under test only.
mkdir -p "$T/empty"
export TP_SYSFS_ROOT="$T/empty"
own=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
ncpu=$(nproc)
get() { sed -n "s/^$1 $2=//p" "$T/out"; }

# bound R: the kernel's CPUs and memory policy are what TP_BIND_CPUS and TP_BIND_NUMA say.
bound() {
    expect_eq "$what: rank $1 CPUs as TP_BIND_CPUS" "$(get "$1" cpus)" "$(get "$1" TP_BIND_CPUS)"
    expect_eq "$what: rank $1 memory bound to TP_BIND_NUMA" "$(get "$1" mem)" "bind:$(get "$1" TP_BIND_NUMA)"
}

if [ "$ncpu" -lt 2 ]; then
    echo "SKIP: one CPU: --bind-to core cannot give two ranks their own"
    exit 77
fi
# two_bound MODE: two ranks, each bound as its variables say.
two_bound() {
    what="--bind-to $1"
    "$TPRUN" -n 2 --bind-to "$1" "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
    expect_eq "$what: status" "$?" 0
    bound 0
    bound 1
}
two_bound core
expect_eq "$what: rank 0 why" "$(get 0 TP_BIND_WHY)" "core L#0 by local rank"
expect_eq "$what: rank 1 why" "$(get 1 TP_BIND_WHY)" "core L#1 by local rank"
[ "$(get 0 cpus)" != "$(get 1 cpus)" ] || fail "$what: ranks 0 and 1 share CPUs $(get 0 cpus)"
[ "$(get 0 cpus)" != "$own" ] || fail "$what: rank 0 kept all of tprun's CPUs ($own)"

two_bound numa
expect_eq "$what: rank 0 why" "$(get 0 TP_BIND_WHY)" "NUMA node $(get 0 TP_BIND_NUMA) by local rank"

# Within tprun's own CPUs: under taskset the only core left is the one a rank gets.
last=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status | tr ',' '\n' | tail -1 | sed 's/.*-//')
what="taskset -c $last"
taskset -c "$last" "$TPRUN" -n 1 --bind-to core "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
expect_eq "$what: status" "$?" 0
expect_eq "$what: rank 0 CPUs" "$(get 0 cpus)" "$last"
bound 0

# This machine's CPUs as an XML topology's (HWLOC_THISSYSTEM=1) under taskset -c 0: the GPU on node 0 gets CPU 0
# for real; node 1 keeps its memory but none of tprun's CPUs, so its GPU's rank is not bound.
A="$T/a"
for b in 1b:0 8a:1; do
    d="$A/bus/pci/devices/0000:${b%:*}:00.0"
    mkdir -p "$d"
    echo 0x10de >"$d/vendor"
    echo 0x030200 >"$d/class"
    echo "${b#*:}" >"$d/numa_node"
done
what="node without tprun's CPUs"
if taskset -c 0 true 2>/dev/null; then
    TP_SYSFS_ROOT=$A HWLOC_THISSYSTEM=1 HWLOC_XMLFILE="$(cd "$(dirname "$0")" && pwd)/bind/two_numa_smt.xml" \
        taskset -c 0 "$TPRUN" -n 2 "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
    expect_eq "$what: status" "$?" 0
    expect_eq "$what: rank 0" "$(get 0 TP_GPU_BUS_ID) $(get 0 TP_BIND_CPUS) $(get 0 TP_BIND_WHY)" \
        "0000:1b:00.0 0 nearest GPU 0000:1b:00.0"
    bound 0
    expect_eq "$what: rank 1" "$(get 1 TP_BIND_NUMA) $(get 1 cpus) $(get 1 mem)" "- 0 default"
    expect_eq "$what: rank 1 why" "$(get 1 TP_BIND_WHY)" \
        "nearest GPU 0000:8a:00.0: NUMA node 1 has none of tprun's CPUs: not bound"
fi

# Unbound: the ranks keep tprun's CPUs and the default memory policy, and say why.
unbound() {
    expect_eq "$what: status" "$st" 0
    expect_eq "$what: rank $1 CPUs and memory" "$(get "$1" cpus) $(get "$1" mem)" "$own default"
    expect_eq "$what: rank $1 TP_BIND_CPUS, TP_BIND_NUMA" "$(get "$1" TP_BIND_CPUS) $(get "$1" TP_BIND_NUMA)" "$own -"
    expect_eq "$what: rank $1 TP_BIND_WHY" "$(get "$1" TP_BIND_WHY)" "$2"
}
# With nothing to bind near, each rank takes its share of tprun's cores (left free, two ranks that wait on each
# other end up taking turns on one CPU while another idles); its memory is left to the kernel.
what="default (no GPU, no HCA)"
"$TPRUN" -n 2 "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
expect_eq "$what: status" "$?" 0
for r in 0 1; do
    expect_eq "$what: rank $r CPUs as TP_BIND_CPUS" "$(get $r cpus)" "$(get $r TP_BIND_CPUS)"
    expect_eq "$what: rank $r memory, TP_BIND_NUMA" "$(get $r mem) $(get $r TP_BIND_NUMA)" "default -"
    get $r TP_BIND_WHY | grep -Eq "^no GPU or HCA to bind near: (core L#[0-9]+|cores L#[0-9]+-L#[0-9]+) by local rank$" ||
        fail "$what: rank $r TP_BIND_WHY '$(get $r TP_BIND_WHY)'"
done
[ -n "$(get 0 cpus)" ] && [ "$(get 0 cpus)" != "$own" ] || fail "$what: rank 0 kept all of tprun's CPUs ($own)"
python3 -c 'import sys
def cpus(l): return {c for p in l.split(",") for a, _, b in [p.partition("-")] for c in range(int(a), int(b or a) + 1)}
sys.exit(1 if cpus(sys.argv[1]) & cpus(sys.argv[2]) else 0)' "$(get 0 cpus)" "$(get 1 cpus)" ||
    fail "$what: ranks 0 and 1 share CPUs: $(get 0 cpus) and $(get 1 cpus)"
what="default, one rank"
"$TPRUN" -n 1 "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
st=$?
unbound 0 "no GPU or HCA to bind near: not bound"
what="--bind-to none"
TP_BIND_TO=core "$TPRUN" -n 2 --bind-to none "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
st=$?
unbound 0 "--bind-to none"
# Oversubscribed: the cores in turn, so rank ncores shares rank 0's core (memory with the core for --bind-to core,
# left to the kernel by default).
if [ "$ncpu" -le 32 ]; then
    n=$((ncpu + 1))
    for mode in core default; do
        what="oversubscribed, $mode"
        if [ $mode = core ]; then
            TP_BIND_TO=core "$TPRUN" -n $n "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
        else
            "$TPRUN" -n $n "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
        fi
        expect_eq "$what: status" "$?" 0
        over=$(get 0 TP_BIND_WHY | sed -n "s/.*core L#[0-9]* in turn by local rank (oversubscribed: $n ranks for \([0-9]*\) cores)$/\1/p")
        [ -n "$over" ] || fail "$what: rank 0 TP_BIND_WHY '$(get 0 TP_BIND_WHY)'"
        for r in 0 $over; do
            expect_eq "$what: rank $r CPUs as TP_BIND_CPUS" "$(get $r cpus)" "$(get $r TP_BIND_CPUS)"
            if [ $mode = core ]; then bound $r; else expect_eq "$what: rank $r memory" "$(get $r mem)" default; fi
        done
        expect_eq "$what: rank $over shares rank 0's core" "$(get "$over" cpus)" "$(get 0 cpus)"
        [ "$(get 0 cpus)" != "$own" ] || fail "$what: rank 0 kept all of tprun's CPUs ($own)"
    done
fi

# The ssh agents' path: each host's agent computes its own ranks' GPUs (local ranks 0 and 1 on each host), from
# TP_SYSFS_ROOT and -x variables; a host that cannot give each rank a GPU fails the launch naming itself.
FAKE_SSH="$(cd "$(dirname "$0")" && pwd)/fake_ssh.sh"
XML="$(cd "$(dirname "$0")" && pwd)/bind/two_numa_smt.xml"
G="$T/gpus"
for b in 1b:0 3b:0 8a:1 b1:1; do
    d="$G/devices/pci0000:${b%:*}/0000:${b%:*}:00.0"
    mkdir -p "$d" "$G/bus/pci/devices"
    echo 0x10de >"$d/vendor"
    echo 0x030200 >"$d/class"
    echo "${b#*:}" >"$d/numa_node"
    ln -s "../../../devices/pci0000:${b%:*}/0000:${b%:*}:00.0" "$G/bus/pci/devices/0000:${b%:*}:00.0"
done
what="agents"
TP_SYSFS_ROOT=$G "$TPRUN" -H h1:2,h2:2 --ssh "$FAKE_SSH" -x HWLOC_XMLFILE="$XML" -x CUDA_VISIBLE_DEVICES=3,2 \
    "$RANKP" '*:bind' >"$T/out" 2>"$T/err"
expect_eq "$what: status" "$?" 0
[ -s "$T/err" ] && fail "$what: stderr: $(cat "$T/err")"
NA=" (not applied: the topology is not this machine's)"
for r in 0 2; do
    expect_eq "$what: rank $r" "$(get $r CUDA_VISIBLE_DEVICES) $(get $r TP_GPU_BUS_ID) $(get $r TP_BIND_CPUS)" \
        "3 0000:b1:00.0 4-7,12-15"
    expect_eq "$what: rank $r why" "$(get $r TP_BIND_WHY)" "nearest GPU 0000:b1:00.0$NA"
done
for r in 1 3; do
    expect_eq "$what: rank $r" "$(get $r CUDA_VISIBLE_DEVICES) $(get $r TP_GPU_BUS_ID) $(get $r TP_BIND_NUMA)" \
        "2 0000:8a:00.0 1"
done
TP_SYSFS_ROOT=$G "$TPRUN" -H h1:1,h2:3 --ssh "$FAKE_SSH" -x CUDA_VISIBLE_DEVICES=3,2 "$RANKP" '*:bind' \
    >"$T/out" 2>"$T/err"
expect_eq "$what: a host with more ranks than GPUs: status" "$?" 125
grep -q "^tprun: host h2: the launch failed: 3 ranks but 2 GPUs (CUDA_VISIBLE_DEVICES=3,2): start at most 2" "$T/err" ||
    fail "$what: a host with more ranks than GPUs: stderr '$(cat "$T/err")'"
[ -s "$T/out" ] && fail "$what: a rank ran on a host that failed the launch"

# Ranks another launcher started (mpirun) have no TP_BIND_WHY: libtp takes the GPU of their local rank itself
# (tp_gpu_of_local_rank), and warns when the host has too few; tprun's ranks never guess (--gpus-per-rank 0).
MPIRUN=${MPIRUN:-mpirun.openmpi}
if command -v "$MPIRUN" >/dev/null 2>&1 && [ -x "$builddir/tests/runtime_rank" ]; then
    what="mpirun"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TP_SYSFS_ROOT=$G TP_REPORT_BINDINGS=1 timeout -k 5 30 \
        "$MPIRUN" --oversubscribe -x TP_SYSFS_ROOT -x TP_REPORT_BINDINGS -n 2 "$builddir/tests/runtime_rank" boot \
        >"$T/out" 2>&1
    expect_eq "$what: status" "$?" 0
    rows=$(sed -n 's/^tp rank 0 ([^)]*) bindings: [^ ]* *\([01]\) .* \(0000:[0-9a-f:.]*\) .*/\1 \2/p' "$T/out" | tr '\n' ' ')
    expect_eq "$what: each rank's GPU by local rank" "$rows" "0 0000:1b:00.0 1 0000:3b:00.0 "
    TP_SYSFS_ROOT=$G "$TPRUN" -n 5 --gpus-per-rank 0 "$builddir/tests/runtime_rank" boot >"$T/out" 2>&1
    expect_eq "tprun --gpus-per-rank 0, 5 ranks on 4 GPUs: status" "$?" 0
    grep -q "warning" "$T/out" && fail "tprun --gpus-per-rank 0: libtp guessed: $(grep warning "$T/out")"
fi
finish
