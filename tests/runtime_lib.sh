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

# quick_port: a port below the kernel's ephemeral range that no socket uses now (from /proc/net, no process
# per call beyond one grep): tests that start hundreds of torchrun-style jobs cannot pay a python3 start each,
# and ports the kernel hands to bind(0) and connect() never land there.
# Sets PORT (no command substitution: one process fewer per job).
quick_port() {
    local hex
    for _ in 1 2 3 4 5 6 7 8; do
        PORT=$((20000 + RANDOM % 12000))
        printf -v hex ':%04X ' "$PORT"
        grep -qs "$hex" /proc/net/tcp /proc/net/tcp6 || return 0
    done
    PORT=$(free_port)
}

# ready_fifo PATH: makes the FIFO that engines started with --ready PATH announce themselves on, held open on
# fd 3 for reading and writing (so neither side blocks on open); ready_read N PID... then fills READY_PIDS[rank],
# and fails at once when one of PID... (the ranks, or their launcher) ends before N ranks were ready.
ready_fifo() {
    exec 3<&-
    rm -f "$1"
    mkfifo "$1" && exec 3<>"$1"
}
ready_read() {
    local n=$1 line part= got=0 t pid
    shift
    READY_PIDS=()
    for ((t = 0; t < 60; t++)); do
        # A timeout may cut a line that is being read (on a loaded machine): its start is kept for the next read.
        while [ $got -lt "$n" ] && read -r -t 1 -u 3 line; do
            line=$part$line part=
            [[ $line =~ ^ready\ ([0-9]+)\ ([0-9]+)$ ]] || return 1
            READY_PIDS[BASH_REMATCH[1]]=${BASH_REMATCH[2]}
            got=$((got + 1))
        done
        part+=$line
        [ $got -ge "$n" ] && return 0
        for pid in "$@"; do alive "$pid" || return 1; done # a rank (or the launcher) ended before all were ready
    done
    return 1
}

# only_victim_named VICTIM FILE...: whether the survivors' lines in FILE name VICTIM as the failed rank and no
# other rank (line prefixes that name the writer, and "reported by rank N", are not claims of failure). Lines of
# tprun itself and, under --tag-output, of the victim are not the survivors'. Status 1: another rank is named;
# 2: no rank is.
only_victim_named() {
    local victim=$1 line rest n named=0
    shift
    while IFS= read -r line; do
        [[ $line == "[$victim] "* || $line == "tprun: "* ]] && continue
        [[ $line =~ ^\[[0-9]+\]\  ]] && line=${line#"${BASH_REMATCH[0]}"}
        [[ $line == "ready "* ]] && continue
        [[ $line =~ ^(tp\ rank\ [0-9]+\ \([^\)]*\)\ |engine:\ rank\ [0-9]+:\ |callback:\ rank\ [0-9]+\ ) ]] &&
            line=${line#"${BASH_REMATCH[0]}"}
        [[ $line == *"peer rank $victim ("* ]] && named=1
        rest=$line
        while [[ $rest =~ (reported\ by\ )?(rank|peer)\ ([0-9]+) ]]; do
            n=${BASH_REMATCH[3]}
            [ -z "${BASH_REMATCH[1]}" ] && [ "$n" != "$victim" ] && return 1
            rest=${rest#*"${BASH_REMATCH[0]}"}
        done
    done < <(cat "$@" 2>/dev/null)
    [ $named = 1 ] || return 2
}
