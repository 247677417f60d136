#!/bin/sh
# The spin policy's view of the CPUs: ranks confined to fewer CPUs than there are ranks (taskset here; a cgroup or a
# Slurm allocation alike) yield at once while they wait, even on a kernel with CPUs to spare; ranks whose CPUs no
# other rank may use never yield. Each rank's record names the CPUs it may run on; the runtime counts the union over
# the kernel's ranks.
. "$(dirname "$0")/launcher_lib.sh"

command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
# A replayed sysfs without GPUs or HCAs: on a GPU host, tprun would refuse more ranks than GPUs.
mkdir -p "$T/empty"
export TP_SYSFS_ROOT="$T/empty"
first=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
line="transport: 2 ranks on this kernel share 1 CPUs: a waiting rank yields at once"
out=$(TP_LOG_LEVEL=debug taskset -c "$first" "$TPRUN" -n 2 "$builddir/examples/tp_hello" 2>&1)
n=$(echo "$out" | grep -c "$line")
[ "$n" -eq 2 ] && pass "2 ranks on CPU $first alone: both yield at once" ||
    fail "2 ranks on CPU $first alone: $n of 2 ranks said \"$line\": $(echo "$out" | tail -5)"
# never R WHAT OUT: both ranks said they never yield (no other rank may run on their CPUs), the first on CPUs R.
never() {
    n=$(echo "$3" | grep -c "transport: no other rank on this kernel may run on CPUs [0-9,-]*: a waiting rank never yields")
    first=$(echo "$3" | sed -n 's/^tp rank 0 .* may run on CPUs \([0-9,-]*\): a waiting rank never yields$/\1/p')
    [ "$n" -eq 2 ] && [ -n "$first" ] && { [ -z "$1" ] || [ "$first" = "$1" ]; } && pass "$2: neither rank yields" ||
        fail "$2: $n of 2 ranks never yield (rank 0 on CPUs '$first'): $(echo "$3" | grep transport)"
}
if [ "$(nproc)" -ge 2 ]; then
    out=$(TP_LOG_LEVEL=debug TP_BIND_TO=core "$TPRUN" -n 2 "$builddir/examples/tp_hello" 2>&1)
    echo "$out" | grep -q "share [0-9]* CPUs" && fail "2 ranks with a core each yield: $(echo "$out" | grep share)" ||
        pass "2 ranks with a core each: no rank yields at once"
    never "" "2 ranks with a core each" "$out"
    never "" "2 ranks, each with its share of the cores (no GPU here)" \
        "$(TP_LOG_LEVEL=debug "$TPRUN" -n 2 "$builddir/examples/tp_hello" 2>&1)"
fi
# Shares of several CPUs each (a replayed 8-core machine: named in the records, not applied).
never 0-3,8-11 "2 ranks with 4 cores each" "$(TP_LOG_LEVEL=debug \
    HWLOC_XMLFILE="$(cd "$(dirname "$0")" && pwd)/bind/two_numa_smt.xml" "$TPRUN" -n 2 "$builddir/examples/tp_hello" 2>&1)"
out=$(TP_LOG_LEVEL=debug "$TPRUN" -n 2 --bind-to none "$builddir/examples/tp_hello" 2>&1)
echo "$out" | grep -q "never yields" && fail "unbound ranks never yield: $(echo "$out" | grep transport)" ||
    pass "unbound ranks (--bind-to none) may yield"
finish
