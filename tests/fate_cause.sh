#!/bin/bash
# An engine that exits on a failed call (tests/fate_engine loop): rank 2 of 4 SIGKILLed or SIGSTOPped among its
# all_reduce calls, without a launcher and under tprun, TP_ERRORS fatal and return. In every run every survivor
# names rank 2 and no other rank, ends with the mode's status, tprun's status is the victim's, nothing is left
# running. FATE_CAUSE_RUNS runs per case (50).
. "$(dirname "$0")/runtime_lib.sh"
ENGINE=${FATE_ENGINE:-./tests/fate_engine}
[ -x "$ENGINE" ] || { echo "missing $ENGINE (run from the build directory)"; exit 99; }
RUNS=${FATE_CAUSE_RUNS:-50}
N=4
V=2
unset TP_ERRORS TP_LOG_LEVEL TP_HEARTBEAT_TIMEOUT

# bad WHY: the current run failed (the first reason is kept).
bad() { [ -n "$BAD" ] || BAD=$*; }
slurp() { TEXT=; [ -r "$1" ] && IFS= read -r -d '' TEXT <"$1"; } # no process per read: 400 runs

# check_rank R STATUS MODE VPID OUT ERR: a survivor's status and its own lines (ERR/OUT hold only its lines, or
# its lines tagged "[R] ").
check_rank() {
    local r=$1 st=$2 mode=$3 vpid=$4 out err tag=
    slurp "$5"; out=$TEXT
    slurp "$6"; err=$TEXT
    [ "$LAUNCH" = tprun ] && tag="\[$r\] "
    local who="peer rank $V \(host [^,]*, pid $vpid\) failed: "
    [ "$st" = "$WANT" ] || bad "rank $r: status $st, not $WANT"
    [[ $out =~ (^|$'\n')${tag}callback:\ rank\ $r\ saw\ peer\ $V\  ]] || bad "rank $r: no fate callback saw rank $V"
    [[ $out =~ callback:\ rank\ $r\ .*callback:\ rank\ $r\  ]] && bad "rank $r: the fate callbacks ran twice"
    if [ "$mode" = fatal ]; then
        [[ $err =~ (^|$'\n')${tag}tp\ rank\ $r\ \([^\)]*\)\ fate:\ error:\ $who ]] || bad "rank $r: no fate line naming rank $V"
    else
        [[ $err =~ (^|$'\n')${tag}engine:\ rank\ $r:\ [^:]*:\ tp_all_reduce:\ $who ]] ||
            bad "rank $r: no engine line naming rank $V from tp_all_reduce"
        [[ $err =~ (^|$'\n')${tag}engine:\ rank\ $r:\ tp_fate_failure:\ rank\ $V\ \(host\ [^,]*,\ pid\ $vpid\) ]] ||
            bad "rank $r: tp_fate_failure does not name rank $V"
    fi
}

# names_judged STATUS TORN: only_victim_named's STATUS over a run's survivors, TORN of them ended by tprun unheard.
names_judged() {
    [ "$2" -gt 0 ] && TORN_RUNS=$((TORN_RUNS + 1))
    case $1 in
    1) bad "a survivor names another rank as failed" ;;
    2) [ "$2" = $((N - 1)) ] || bad "no survivor names rank $V" ;;
    esac
}

# run_torch SIG MODE: one torchrun-style job (each rank under a timeout, which reaps promptly as torchrun does).
run_torch() {
    local sig=$1 mode=$2 r
    quick_port
    TP_ERRORS=$mode torch_job $N "$PORT" "$DIR/run" timeout -s KILL 60 "$ENGINE" loop --ready "$FIFO"
    ready_read $N "${JOB_PIDS[@]}" || { bad "ranks never got ready"; return; }
    local vpid=${READY_PIDS[$V]}
    kill "-$sig" "$vpid"
    if [ "$sig" = KILL ]; then
        wait_status "${JOB_PIDS[$V]}"
        [ "$ST" = 137 ] || bad "the victim's status is $ST"
    fi
    for ((r = 0; r < N; r++)); do
        [ $r = $V ] && continue
        wait_status "${JOB_PIDS[$r]}"
        check_rank $r "$ST" "$mode" "$vpid" "$DIR/run.$r.out" "$DIR/run.$r.err"
    done
    only_victim_named $V "$DIR"/run.[013].*
    names_judged $? 0
    if [ "$sig" = STOP ]; then
        kill -KILL "$vpid"
        wait_status "${JOB_PIDS[$V]}"
    fi
}

# run_tprun SIG MODE: one tprun job; every rank's status from --json-summary, the survivors' lines by their tag.
run_tprun() {
    local sig=$1 mode=$2 r json first torn0=$TORN
    : >"$DIR/sum.json"
    TP_ERRORS=$mode timeout -k 5 60 "$TPRUN" -n $N --tag-output --json-summary "$DIR/sum.json" \
        "$ENGINE" loop --fail-exit 70 --ready "$FIFO" >"$DIR/tp.out" 2>"$DIR/tp.err" &
    local tp=$!
    STARTED_PIDS+=($tp)
    ready_read $N $tp || bad "ranks never got ready"
    local vpid=${READY_PIDS[$V]:-0}
    if [ -n "$BAD" ]; then kill -TERM $tp; else kill "-$sig" "$vpid"; fi
    wait_status $tp
    local want_tp=137 want_first="rank $V \(host [^,]*, pid $vpid\) killed by signal 9"
    [ "$sig" = STOP ] && want_tp=70 want_first="rank $V \(host [^,]*, pid $vpid\) stopped answering"
    [ "$ST" = $want_tp ] || bad "tprun's status is $ST, not $want_tp"
    slurp "$DIR/tp.err"
    [[ $TEXT =~ (^|$'\n')tprun:\ ([^$'\n']*) ]] && first=${BASH_REMATCH[2]}
    [[ $first =~ ^$want_first ]] || bad "tprun's first line is not rank $V's: ${first:-none}"
    slurp "$DIR/sum.json"
    json=$TEXT
    for ((r = 0; r < N; r++)); do
        [ $r = $V ] && continue
        [[ $json =~ \"rank\":\ $r,[^\}]*\"status\":\ ([0-9]+|null)[^\}]*\"tprun_signal\":\ (null|\"[A-Z]+\") ]]
        # tprun ends the job at the victim's end: a survivor its SIGTERM reached first may not have logged yet
        if [ "${BASH_REMATCH[1]}" = 143 ] && [ "${BASH_REMATCH[2]}" = '"SIGTERM"' ]; then
            TORN=$((TORN + 1))
            continue
        fi
        check_rank $r "${BASH_REMATCH[1]:-none}" "$mode" "$vpid" "$DIR/tp.out" "$DIR/tp.err"
    done
    only_victim_named $V "$DIR/tp.out" "$DIR/tp.err"
    names_judged $? $((TORN - torn0))
}

# fate_case LAUNCH SIG MODE: RUNS runs; the first bad run's reason and outputs end the case.
fate_case() {
    LAUNCH=$1
    local sig=$2 mode=$3 name="$1 SIG$2 TP_ERRORS=$3" run p t0=$SECONDS
    WANT=70
    TORN=0 TORN_RUNS=0
    [ "$LAUNCH" = torch ] && [ "$mode" = return ] && WANT=4 # the issue's engine: exit 4 on any error
    # A stopped rank is found by its silence: a short timeout keeps those runs short; kills keep the default.
    [ "$sig" = STOP ] && export TP_HEARTBEAT_TIMEOUT=0.3 || unset TP_HEARTBEAT_TIMEOUT
    step "$name"
    for ((run = 1; run <= RUNS; run++)); do
        BAD=
        ready_fifo "$FIFO"
        run_$LAUNCH "$sig" "$mode"
        for p in "${READY_PIDS[@]}"; do
            alive "$p" && bad "pid $p is left running" && kill -KILL "$p"
        done
        if [ -n "$BAD" ]; then
            fail "$name: run $run: $BAD"
            if [ "$LAUNCH" = torch ]; then tail -n +1 "$DIR"/run.*; else tail -n +1 "$DIR"/tp.* "$DIR/sum.json"; fi
            return
        fi
    done
    local torn=
    [ "$LAUNCH" = tprun ] && torn="; in $TORN_RUNS runs tprun's SIGTERM ended $TORN survivors before their own end"
    pass "$name: $RUNS/$RUNS runs named rank $V ($((SECONDS - t0)) s$torn)"
}

# stream NAME CASE...: the cases one after another in a subshell, in a folder of its own; its status is its
# count of failed cases, and it ends what it started (the subshell is their parent, not $$).
stream() {
    DIR=$TEST_DIR/$1
    FIFO=$DIR/ready
    shift
    mkdir -p "$DIR"
    trap 'for p in "${STARTED_PIDS[@]}"; do [ "$(ppid_of "$p")" = "$BASHPID" ] && kill -9 -- "-$p" "$p"; done 2>/dev/null' EXIT
    local spec
    for spec in "$@"; do fate_case $spec; done
    exit $fails
}
ppid_of() { local stat; read -r stat 2>/dev/null <"/proc/$1/stat" && set -- ${stat##*) } && echo "$2"; }

# Four streams at once: a run mostly waits (for processes to start, for the heartbeat timeout of a stopped rank),
# so the runs of one stream fill another's waits.
t0=$SECONDS
streams=()
for launch in torch tprun; do
    for sig in KILL STOP; do
        stream "$launch-$sig" "$launch $sig fatal" "$launch $sig return" >"$TEST_DIR/$launch-$sig.log" 2>&1 &
        streams+=($!)
        STARTED_PIDS+=($!)
    done
done
for s in "${streams[@]}"; do
    wait_status "$s"
    fails=$((fails + ST))
done
cat "$TEST_DIR"/*.log
echo "fate_cause: 8 cases of $RUNS runs in $((SECONDS - t0)) s"
finish
