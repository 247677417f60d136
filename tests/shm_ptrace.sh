#!/bin/sh
# shm where peers may not take a rank's fds, played by an LD_PRELOAD shim (tests/fake_ptrace.c): a kernel without
# pidfd_getfd (or valgrind 3.19), and Yama's ptrace_scope at 1 (each rank names any process of its user as its
# tracer, and shm goes on unless that is refused), 2 (only with CAP_SYS_PTRACE) and 3 (never). Where shm steps aside, each rank says why and
# the ranks talk over TCP; a single rank that steps aside is enough.
. "$(dirname "$0")/launcher_lib.sh"

SHIM="$builddir/tests/.libs/libfakeptrace.so"
[ -f "$SHIM" ] || { echo "SKIP: $SHIM is not built"; exit 77; }
# A sanitizer build's shim needs its ASan runtime loaded first (ASan refuses to start otherwise).
ASAN_RT=$(ldd "$SHIM" | awk '/libasan/ {print $3}')
PRELOAD="${ASAN_RT:+$ASAN_RT }$SHIM"
mkdir -p "$T/empty"
export TP_SYSFS_ROOT="$T/empty" # no GPU: two ranks on a GPU host are not refused

export TP_LOG_LEVEL=debug # each rank names the transport of each pair

# run [VAR=VALUE...] [COMMAND ARGS...]: two ranks (through COMMAND), each an all_reduce under the shim with the
# variables, into $T/out; $st is tprun's. ONLY_RANK=R: the shim's variables reach rank R alone.
run() {
    env "$@" "$TPRUN" -n 2 sh -c '[ -z "$ONLY_RANK" ] || [ "$LOCAL_RANK" = "$ONLY_RANK" ] ||
        unset FAKE_NO_PIDFD FAKE_YAMA_SCOPE FAKE_PTRACER_FAILS; exec env LD_PRELOAD="$0" "$@"' "$PRELOAD" \
        "$builddir/tp-bench" --ops allreduce --sizes 16 --iters 5 >"$T/out" 2>&1
    st=$?
}
# over WHAT TRANSPORT: the job passed and each rank reached the other over TRANSPORT.
over() {
    expect_eq "$1: status" "$st" 0
    n=$(grep -c "iface: rank [01] (host [^)]*): $2, the same host" "$T/out")
    expect_eq "$1: pairs over $2" "$n" 2
}
# said WHAT COUNT LINE: COUNT lines of the output contain LINE.
said() { expect_eq "$1: lines saying \"$3\"" "$(grep -cF -- "$3" "$T/out")" "$2"; }
TCP="; ranks on this host use TCP"
NA="not available: peers could not take this rank's segment: "

what="ptrace_scope 0"
run FAKE_YAMA_SCOPE=0
over "$what" shm
said "$what" 0 "prctl(PR_SET_PTRACER"

what="ptrace_scope 1"
run FAKE_YAMA_SCOPE=1
over "$what" shm
said "$what" 2 "prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)"

what="ptrace_scope 1, prctl refused"
run FAKE_YAMA_SCOPE=1 FAKE_PTRACER_FAILS=1
over "$what" tcp
said "$what" 2 "${NA}Yama's ptrace_scope is 1 and prctl(PR_SET_PTRACER) failed: Operation not permitted$TCP"

what="ptrace_scope 3"
run FAKE_YAMA_SCOPE=3
over "$what" tcp
said "$what" 2 "${NA}Yama's ptrace_scope 3 allows it to no process$TCP"

what="no pidfd_getfd"
run FAKE_NO_PIDFD=1
over "$what" tcp
said "$what" 2 "${NA}pidfd_open of itself failed: Function not implemented (Linux 5.6 has it; a tool such as valgrind may not)$TCP"

what="rank 1 alone without pidfd_getfd"
run FAKE_NO_PIDFD=1 ONLY_RANK=1
over "$what" tcp
said "$what" 1 "$NA"

# Scope 2: with CAP_SYS_PTRACE (root) shm goes on; without it (dropped from the bounding set) it steps aside.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
    what="ptrace_scope 2, CAP_SYS_PTRACE"
    run FAKE_YAMA_SCOPE=2
    over "$what" shm
    said "$what" 0 "$NA"
    what="ptrace_scope 2, no CAP_SYS_PTRACE"
    run FAKE_YAMA_SCOPE=2 setpriv --bounding-set=-sys_ptrace
    over "$what" tcp
    said "$what" 2 "${NA}Yama's ptrace_scope 2 allows it only with CAP_SYS_PTRACE, which this rank lacks$TCP"
else
    echo "not root or no setpriv: ptrace_scope 2 not played"
fi
finish
