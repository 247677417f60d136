#!/bin/sh
# The spin policy's view of the CPUs: ranks confined to fewer CPUs than there are ranks (taskset here; a cgroup or a
# Slurm allocation alike) yield at once while they wait, even on a kernel with CPUs to spare; ranks with a CPU each
# do not. Each rank's record names the CPUs it may run on; the runtime counts the union over the kernel's ranks.
. "$(dirname "$0")/launcher_lib.sh"

command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
first=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*\([0-9]*\).*/\1/p' /proc/self/status)
line="transport: 2 ranks on this kernel share 1 CPUs: a waiting rank yields at once"
out=$(TP_LOG_LEVEL=debug taskset -c "$first" "$TPRUN" -n 2 "$builddir/examples/tp_hello" 2>&1)
n=$(echo "$out" | grep -c "$line")
[ "$n" -eq 2 ] && pass "2 ranks on CPU $first alone: both yield at once" ||
    fail "2 ranks on CPU $first alone: $n of 2 ranks said \"$line\": $(echo "$out" | tail -5)"
if [ "$(nproc)" -ge 2 ]; then
    out=$(TP_LOG_LEVEL=debug TP_BIND_TO=core "$TPRUN" -n 2 "$builddir/examples/tp_hello" 2>&1)
    echo "$out" | grep -q "share [0-9]* CPUs" && fail "2 ranks with a core each yield: $(echo "$out" | grep share)" ||
        pass "2 ranks with a core each: no rank yields at once"
fi
finish
