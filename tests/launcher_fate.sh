#!/bin/bash
# tprun's teardown after a failure: libtp ranks ending on their own (fate path: line, callbacks, exit 70) are not
# SIGTERMed in the middle of it; a rank that does not end still is, after the fate window; --grace 0 kills at
# once; a SIGKILLed or SIGSTOPped middle rank of 4 gives tprun that rank's failure and every survivor's callback,
# and a stopped rank is ended without running again.
. "$(dirname "$0")/launcher_lib.sh"
RANKT="$builddir/tests/runtime_rank"
[ -x "$RANKT" ] || { echo "missing $RANKT (run from the build directory)"; exit 99; }
RUNS=${LAUNCHER_FATE_RUNS:-8}

# A survivor's callback that takes 80 ms (an ncclCommAbort, say): it runs to its end, and tprun's status is the
# failing rank's without ending anyone.
out=$("$TPRUN" -n 3 "$RANKT" exit 1 7 --callback-ms 80 2>"$T/err")
st=$?
[ $st -eq 7 ] && echo "$out" | grep -qx 'callback done: rank 0' && echo "$out" | grep -qx 'callback done: rank 2' &&
    grep -q '^tprun: job .*: exit status 7 (rank 1 failed first)$' "$T/err" &&
    pass "survivors ending on their own finish their fate callbacks (status $st, nothing ended by tprun)" ||
    fail "slow fate callbacks: status $st: $out $(cat "$T/err")"

# With --grace 0 tprun still kills at once: the callbacks are cut short.
out=$("$TPRUN" --grace 0 -n 3 "$RANKT" exit 1 7 --callback-ms 80 2>"$T/err")
st=$?
[ $st -eq 7 ] && ! echo "$out" | grep -q 'callback done' && grep -q 'tprun ended ranks 0,2)$' "$T/err" &&
    pass "--grace 0 kills the survivors at once (status $st)" || fail "--grace 0: status $st: $out $(cat "$T/err")"

# A rank that does not end on its own is SIGTERMed after the fate window, and SIGKILLed after the grace when it
# ignores that.
"$TPRUN" -n 2 --json-summary "$T/sum.json" "$RANKP" 1:exit=3 0:hang >/dev/null 2>"$T/err"
st=$?
[ $st -eq 3 ] && grep -q '"rank": 0,.*"signal_name": "SIGTERM",.*"ended_by_tprun": true' "$T/sum.json" &&
    grep -q 'tprun ended rank 0)$' "$T/err" && pass "a rank that does not end is SIGTERMed (status $st)" ||
    fail "a hanging rank: status $st: $(cat "$T/err" "$T/sum.json")"
# (SIGTERM ignored from the start, inherited: no race between rank 1's exit and rank 0's own ignoring it.)
(trap '' TERM && exec "$TPRUN" -n 2 --grace 0.2 --json-summary "$T/sum.json" "$RANKP" 1:exit=3 0:hang) >/dev/null 2>"$T/err"
st=$?
[ $st -eq 3 ] && grep -q '"rank": 0,.*"signal_name": "SIGKILL",.*"ended_by_tprun": true' "$T/sum.json" &&
    pass "a rank that ignores SIGTERM is SIGKILLed after the grace (status $st)" ||
    fail "a rank ignoring SIGTERM: status $st: $(cat "$T/err" "$T/sum.json")"

# victim SIG: tprun -n 4 block with SIG to rank 2 once the four are ready; sets st and vpid, stdout in $T/out.
victim() {
    local line n=0
    rm -f "$T/fifo"
    mkfifo "$T/fifo"
    TP_HEARTBEAT_TIMEOUT=0.3 "$TPRUN" -n 4 --tag-output "$RANKT" block >"$T/fifo" 2>"$T/err" &
    tp=$!
    exec 3<"$T/fifo"
    : >"$T/out"
    vpid=
    while [ $n -lt 4 ] && IFS= read -r line <&3; do
        echo "$line" >>"$T/out"
        case $line in *"] ready rank "*) n=$((n + 1)) ;; esac
        case $line in "[2] ready rank 2 of 4 pid "*) vpid=${line#*pid } vpid=${vpid%% *} ;; esac
    done
    [ -n "$vpid" ] && kill "-$1" "$vpid"
    cat <&3 >>"$T/out"
    exec 3<&-
    wait $tp
    st=$?
}

# victim_case SIG STATUS FIRST: RUNS runs; tprun's status, its first line, the three survivors' callbacks, and no
# line of rank 2 blaming another rank.
victim_case() {
    local sig=$1 want=$2 first=$3 run r bad=
    for ((run = 1; run <= RUNS && -z "$bad"; run++)); do
        victim "$sig"
        [ $st -eq "$want" ] || bad="status $st"
        grep -m1 '^tprun:' "$T/err" | grep -q "^tprun: rank 2 (host [^,]*, pid $vpid) $first" ||
            bad="${bad:-first line}"
        # The stopped rank meets the SIGTERM as it resumes: it never wakes up to blame its ended peers.
        grep -qE '^\[2\] (callback: rank 2 saw|tp rank 2 .* fate: error: peer rank)' "$T/out" "$T/err" &&
            bad="${bad:-rank 2 ran again and blamed a peer}"
        for r in 0 1 3; do
            grep -q "^\[$r\] callback: rank $r saw peer 2 " "$T/out" || bad="${bad:-no callback on rank $r}"
        done
        [ -z "$bad" ] || bad="run $run: $bad: $(cat "$T/out" "$T/err")"
    done
    [ -z "$bad" ] && pass "SIG$sig of rank 2 of 4: status $want, rank 2 named first, 3 callbacks ($RUNS runs)" ||
        fail "SIG$sig of rank 2 of 4: $bad"
}
victim_case KILL 137 'killed by signal 9 (SIGKILL)$'
victim_case STOP 70 'stopped answering: it is stopped by signal 19 (SIGSTOP)$'
finish
