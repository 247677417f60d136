#!/bin/bash
# The stop word: a rank waiting in a call that peers' tp_finalize leaves without partners gets TP_STOPPED, names
# who stopped and where it waits, finalizes, and the job ends with status 0, fast (tests/fate_engine straggler,
# serve, p2p, split). A rank that exits 0 without tp_finalize is still a failure, named. Over every transport,
# under tprun, tprun --pmix and a torchrun-style launch.
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/pmix_lib.sh"
ENGINE=${FATE_ENGINE:-./tests/fate_engine}
[ -x "$ENGINE" ] || { echo "missing $ENGINE (run from the build directory)"; exit 99; }
[ -x ./tests/coll_check ] || { echo "missing ./tests/coll_check (run from the build directory)"; exit 99; }
unset TP_ERRORS TP_LOG_LEVEL TP_HEARTBEAT_TIMEOUT TP_TRANSPORTS
N=4
LIMIT=20 # each job runs under timeout LIMIT and must end well within it
BOUND=8
# A sanitizer build's processes start and end several times slower (tests/local.mk sets ASAN_OPTIONS for it):
# beside the other tests its tprun --pmix jobs took 8.2-10 s. Its run checks what happens; the plain build the speed.
[ -z "${ASAN_OPTIONS:-}" ] || LIMIT=40 BOUND=16

# job LAUNCH MODE ARGS...: runs the engine on N ranks; JOB_ST is the job's status (tprun's, or 0 when every rank
# exited 0), RANK_ST[r] each rank's (under tprun from --json-summary, with a T when tprun sent it SIGTERM), TEXT
# every rank's lines tagged "[r] ", WALL the seconds.
job() {
    local launch=$1 r line t0=$EPOCHREALTIME
    shift
    TEXT= NOTE=
    if [ "$launch" = torch ]; then
        quick_port
        torch_job $N "$PORT" "$TEST_DIR/job" timeout -s KILL $LIMIT "$ENGINE" "$@"
        JOB_ST=0
        for ((r = 0; r < N; r++)); do
            wait_status "${JOB_PIDS[$r]}"
            RANK_ST[r]=$ST
            [ "$ST" = 0 ] || JOB_ST=$ST
        done
        WALL=$(elapsed "$t0")
        for ((r = 0; r < N; r++)); do
            while IFS= read -r line; do TEXT+="[$r] $line"$'\n'; done <"$TEST_DIR/job.$r.out"
            while IFS= read -r line; do TEXT+="[$r] $line"$'\n'; done <"$TEST_DIR/job.$r.err"
        done
    else
        local opt=
        [ "$launch" = pmix ] && opt=--pmix
        : >"$TEST_DIR/sum.json"
        timeout -k 5 $LIMIT "$TPRUN" $opt -n $N --tag-output --json-summary "$TEST_DIR/sum.json" "$ENGINE" "$@" \
            >"$TEST_DIR/job.out" 2>&1 &
        local tp=$!
        STARTED_PIDS+=($tp)
        wait_status $tp
        JOB_ST=$ST
        WALL=$(elapsed "$t0")
        IFS= read -r -d '' TEXT <"$TEST_DIR/job.out"
        local json
        IFS= read -r -d '' json <"$TEST_DIR/sum.json"
        for ((r = 0; r < N; r++)); do # tprun's teardown signal shows as "T" after the status
            [[ $json =~ \"rank\":\ $r,[^\}]*\"status\":\ ([0-9]+|null)[^\}]*\"tprun_signal\":\ (null|\"[A-Z]+\") ]]
            RANK_ST[r]=${BASH_REMATCH[1]:-none}
            [ "${BASH_REMATCH[2]}" = '"SIGTERM"' ] && RANK_ST[r]+=T
        done
    fi
}
# elapsed T0: seconds since T0 (an EPOCHREALTIME), to the millisecond.
elapsed() {
    local now=${EPOCHREALTIME/./} then=${1/./}
    local ms=$(((now - then) / 1000))
    printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}
# faster A B: whether A < B seconds (both with at most 3 decimals).
faster() { [ "$(printf '%.0f' "${1}e3")" -lt "$(printf '%.0f' "${2}e3")" ]; }

# has WHAT REGEX: TEXT has a line matching REGEX (anchored at the line's start); else the job fails with WHAT.
has() { [[ $TEXT =~ (^|$'\n')$2 ]] || bad "$1"; }
bad() { [ -n "$BAD" ] || BAD=$*; }

# stopped_job NAME LAUNCH MODE: a clean stop: status 0, fast, no fate at all.
stopped_job() {
    local name=$1
    shift
    BAD=
    job "$@"
    [ "$JOB_ST" = 0 ] || bad "status $JOB_ST"
    faster "$WALL" $BOUND || bad "took $WALL s (bound $BOUND s, timeout $LIMIT s)"
    [[ $TEXT =~ fate:|callback: ]] && bad "fate fired"
}
verdict() {
    if [ -n "$BAD" ]; then
        fail "$1: $BAD"
        printf '%s' "$TEXT"
    else
        pass "$1 ($WALL s$NOTE)"
    fi
}

STOP="called tp_finalize while this rank waits in"
# one_launch LAUNCH TRANSPORT: every case once.
one_launch() {
    local l=$1 t=$2 r name w
    export TP_TRANSPORTS=$t
    name="$l, $t: straggler"
    stopped_job "$name" "$l" straggler 100
    has "rank 1 did not stop" "\[1\] engine: rank 1: call 100 stopped in ([0-9.]+) s: rank [023]( and [12] others?)? $STOP all_reduce call 100 on comm 0"$'\n'
    [ -n "$BAD" ] || faster "${BASH_REMATCH[2]}" 1 || bad "rank 1's call took ${BASH_REMATCH[2]} s to stop"
    verdict "$name"

    for w in serve p2p; do
        name="$l, $t: $w"
        stopped_job "$name" "$l" $w 100
        has "rank 0 did not serve" "\[0\] engine: rank 0: served 100 requests"
        for ((r = 1; r < N; r++)); do
            if [ $w = serve ]; then
                has "rank $r did not stop after 100" "\[$r\] engine: rank $r: stopped after 100 requests: rank 0( and [12] others?)? $STOP broadcast call 100 on comm 0"$'\n'
            else
                has "rank $r did not stop after 100" "\[$r\] engine: rank $r: stopped after 100 requests: rank 0 $STOP recv call 100 on comm 0"$'\n'
            fi
        done
        verdict "$name"
    done

    # Pairs {0,1} serve 100 and {2,3} 200 on their own comms: rank 0's finalize must not stop rank 3.
    name="$l, $t: split"
    stopped_job "$name" "$l" split 100
    has "rank 1 did not stop after 100" "\[1\] engine: rank 1: stopped after 100 requests: rank 0 $STOP broadcast call 100 on comm ([0-9]+)"$'\n'
    local c1=${BASH_REMATCH[2]:-}
    has "rank 3 did not stop after 200" "\[3\] engine: rank 3: stopped after 200 requests: rank 2 $STOP broadcast call 200 on comm ([0-9]+)"$'\n'
    local c3=${BASH_REMATCH[2]:-}
    [ -z "$BAD" ] && { [ "$c1" = 0 ] || [ "$c3" = 0 ] || [ "$c1" = "$c3" ]; } && bad "comm ids $c1 and $c3"
    verdict "$name"

    # Rank 0 serves, then exits 0 without tp_finalize: a failure, named on every worker.
    name="$l, $t: exit 0 without tp_finalize"
    BAD=
    # Under --enable-sanitizers, LeakSanitizer's scan at rank 0's exit stops every thread it has, the fate thread's
    # heartbeats too, and beside other work for longer than TP_HEARTBEAT_TIMEOUT: the workers then name a rank 0
    # that went silent, not one that ended. This case is about the exit, so that rank's exit goes unscanned.
    local asan_saved=${ASAN_OPTIONS-}
    [ -z "$asan_saved" ] || export ASAN_OPTIONS="$asan_saved:detect_leaks=0"
    job "$l" serve 100 --no-finalize
    [ -z "$asan_saved" ] || export ASAN_OPTIONS="$asan_saved"
    [ "$l" = torch ] || [ "$JOB_ST" = 70 ] || bad "status $JOB_ST, not 70"
    [ "${RANK_ST[0]}" = 0 ] || bad "rank 0's status is ${RANK_ST[0]}"
    local torn=0
    for ((r = 1; r < N; r++)); do
        # tprun ends the job at the first worker's 70: its SIGTERM may reach another before that one logs
        [ "${RANK_ST[r]}" = 143T ] && torn=$((torn + 1)) && continue
        [ "${RANK_ST[r]%T}" = 70 ] || bad "rank $r's status is ${RANK_ST[r]}, not 70" # 70T: it ended first
        has "rank $r does not name rank 0" "\[$r\] tp rank $r \([^)]*\) fate: error: peer rank 0 \(host [^,]*, pid [0-9]+\) failed: "
    done
    [ $torn -lt $((N - 1)) ] || bad "every worker was ended by tprun"
    [ $torn = 0 ] || NOTE="; tprun's SIGTERM ended $torn worker(s) first"
    local files=("$TEST_DIR/job.out")
    [ "$l" = torch ] && files=("$TEST_DIR"/job.[123].*)
    only_victim_named 0 "${files[@]}" || bad "a worker names another rank than 0 as failed"
    faster "$WALL" $BOUND || bad "took $WALL s"
    verdict "$name"
}

transports=$(./tests/coll_check --transports) || { echo "coll_check --transports failed"; exit 99; }
for t in $transports; do
    step "transport $t"
    one_launch torch "$t"
    one_launch tprun "$t"
    if have_pmix_build; then
        one_launch pmix "$t"
    else
        echo "note: tprun --pmix not run (tprun built without PMIx)"
    fi
done
finish
