#!/bin/sh
# A rank killed by the OOM killer is named so: tprun runs in a memory cgroup with a small limit (skipped
# where the test cannot make one: not root, or no cgroup v1/v2 memory controller to use).
. "$(dirname "$0")/launcher_lib.sh"

cg=
if [ -d /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/tprun_oom.$$" 2>/dev/null; then
    cg=/sys/fs/cgroup/memory/tprun_oom.$$
    echo $((64 * 1024 * 1024)) >"$cg/memory.limit_in_bytes" || cg=
    echo $((64 * 1024 * 1024)) >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null
elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && mkdir "/sys/fs/cgroup/tprun_oom.$$" 2>/dev/null; then
    cg=/sys/fs/cgroup/tprun_oom.$$
    echo $((64 * 1024 * 1024)) >"$cg/memory.max" || cg=
    echo 0 >"$cg/memory.swap.max" 2>/dev/null
fi
if [ -z "$cg" ]; then
    echo "SKIP: cannot create a memory cgroup here"
    exit 77
fi
trap 'cleanup; rmdir "$cg" 2>/dev/null' EXIT
in_cgroup() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@"; }

in_cgroup "$TPRUN" -n 2 "$RANKP" '1:pid,alloc=1024,hang' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "OOM: status" "$?" 137
pid=$(sed -n 's/^pid //p' "$T/out")
expect_eq "OOM: first line" "$(first_tprun_line "$T/err")" \
    "tprun: rank 1 (host $(hostname), pid $pid) killed by the kernel's OOM killer (SIGKILL)"
# A plain SIGKILL in the same cgroup is not called an OOM kill.
in_cgroup "$TPRUN" -n 2 "$RANKP" '1:sig=9' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "SIGKILL: status" "$?" 137
first_tprun_line "$T/err" | grep -q 'killed by signal 9 (SIGKILL)$' || fail "plain SIGKILL: $(cat "$T/err")"
finish
