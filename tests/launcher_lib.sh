# launcher_lib.sh: sourced by tests/launcher_*.sh. Runs the test under a timeout, finds the binaries in the
# build directory (the test's working directory under make check) and gives small helpers.

if [ -z "$LAUNCHER_TEST_TIMED" ]; then
    LAUNCHER_TEST_TIMED=1
    export LAUNCHER_TEST_TIMED
    exec timeout -k 5 "${LAUNCHER_TEST_TIMEOUT:-60}" "$0" "$@"
fi

builddir=${builddir:-.}
TPRUN="$builddir/tprun"
RANKP="$builddir/tests/launcher_rank"
for b in "$TPRUN" "$RANKP"; do
    [ -x "$b" ] || { echo "missing $b (run from the build directory)"; exit 99; }
done
# Make sure the tests see tprun's own defaults, not the caller's settings.
unset TP_TIMEOUT TP_KILL_GRACE TP_TORCH_ENV TP_LOG_LEVEL TP_RANK TP_BOOT_FD TP_JOB_KEY

T=$(mktemp -d "${TMPDIR:-/tmp}/launcher_test.XXXXXX")
# Whatever a failed check left running (the pids the tests keep in these variables) is killed on exit.
tp= pids= kids= keeper=
cleanup() {
    # Only this test's kinds of process: a pid that already ended may be another process's by now.
    for p in $tp $pids $kids $keeper; do
        c=
        read -r c 2>/dev/null <"/proc/$p/comm"
        case $c in tprun | tprun-keeper | launcher_rank) alive "$p" && kill -KILL "$p" 2>/dev/null ;; esac
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'echo "FAIL: timed out (a tprun or a rank did not end)"; exit 124' TERM
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

pass() {
    echo "ok: $*"
}

finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$failures check(s) failed"
        exit 1
    fi
    exit 0
}

# expect_eq WHAT GOT WANT
expect_eq() {
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', expected '$3'"; fi
}

# Whether a pid is a live process: a zombie (state Z) counts as dead, as PID 1 may reap it late.
alive() {
    [ -r "/proc/$1/stat" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# wait_dead SECONDS PID...: waits (polling /proc, a test-only check) until none is alive.
wait_dead() {
    limit=$1
    shift
    i=0
    while [ "$i" -lt $((limit * 20)) ]; do
        any=
        for p in "$@"; do alive "$p" && any=$p; done
        [ -z "$any" ] && return 0
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# wait_for_lines FILE N SECONDS [PATTERN]: until FILE has N lines (matching PATTERN).
wait_for_lines() {
    i=0
    while [ "$i" -lt $(($3 * 20)) ]; do
        [ -f "$1" ] && [ "$(grep -c -- "${4:-}" "$1")" -ge "$2" ] && return 0
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# new_job_files: a fresh $out and $err for the next background job. Waiting on a file that an earlier job wrote
# would see that job's lines before the new job's shell truncates it, and signal the new job too early.
job_n=0
new_job_files() {
    job_n=$((job_n + 1))
    out=$T/out.$job_n err=$T/err.$job_n
}

# wait_taken PID SIGNAL_NUMBER: until PID has taken SIGNAL off its pending set (read it from its signalfd or run
# its handler), so that a second one sent after this is not merged with the first.
wait_taken() {
    bit=$((1 << ($2 - 1)))
    i=0
    while [ "$i" -lt 200 ]; do
        pend=0
        for m in $(sed -n 's/^\(ShdPnd\|SigPnd\):[[:space:]]*//p' "/proc/$1/status" 2>/dev/null); do
            pend=$((pend | 0x$m))
        done
        [ $((pend & bit)) = 0 ] && return 0
        sleep 0.05
        i=$((i + 1))
    done
    return 1
}

# The first line tprun itself printed ("tprun: ..."), from a stderr file.
first_tprun_line() {
    grep -m1 '^tprun: ' "$1"
}
