# runtime_lib.sh: helpers for the runtime's multi-rank test scripts (sourced; automake runs tests in the
# build directory, so programs are found relative to it).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/proc_lib.sh"
RANK_PROG=${RANK_PROG:-./tests/runtime_rank}
INTRUDER=${INTRUDER:-./tests/runtime_intruder}
TPRUN=${TPRUN:-./tprun}
TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tp-test.XXXXXX")
STARTED_PIDS=()
fails=0

cleanup() {
    local p
    for p in "${STARTED_PIDS[@]}"; do
        own_child "$p" || continue
        disown "$p" 2>/dev/null # else bash prints a "Killed" notice for it
        kill -9 -- "-$p" 2>/dev/null # a timeout leads its own process group: the program under it too
        kill -9 "$p" 2>/dev/null
    done
    rm -rf "$TEST_DIR"
}
trap cleanup EXIT
trap 'exit 124' TERM # the harness's timeout ends a hung test; cleanup still runs

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
finish() { [ "$fails" -eq 0 ] && exit 0; echo "$fails check(s) failed"; exit 1; }
# step WHAT: says what the test starts now, and when, so that a slow or hung test's log shows where it is.
step() { echo "== ${SECONDS}s: $*"; }

# A port that was free a moment ago (the bootstrap of torchrun-style jobs needs one given up front).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# torch_job N PORT OUTPREFIX CMD...: starts N ranks with a torchrun-style environment, no launcher watching.
# Each rank's stdout/stderr go to OUTPREFIX.R.out/.err; pids land in JOB_PIDS.
torch_job() {
    local n=$1 port=$2 prefix=$3
    shift 3
    JOB_PIDS=()
    for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" >"$prefix.$r.out" 2>"$prefix.$r.err" &
        JOB_PIDS+=($!)
        STARTED_PIDS+=($!)
    done
}

# wait_ready N PREFIX: waits (at most 20 s) until ranks 0..N-1 each printed their "ready" line.
wait_ready() {
    local n=$1 prefix=$2 files=()
    for ((r = 0; r < n; r++)); do files+=("$prefix.$r.out"); done
    for _ in $(seq 1 2000); do
        [ "$(cat "${files[@]}" 2>/dev/null | grep -c '^ready')" -ge "$n" ] && return 0
        sleep 0.01
    done
    return 1
}

# wait_status PID: waits for a child of this shell and sets ST to its exit status.
wait_status() {
    wait "$1" 2>/dev/null
    ST=$?
}
