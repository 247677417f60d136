#!/bin/bash
# Fate across hosts: a rank SIGKILLed on host b, b's agent killed, tprun killed, and host b vanishing (its
# links taken down). Every time every rank on every host is gone, tprun's status and first line name the cause.
. "$(dirname "$0")/netns_lib.sh"
RUNS=${SSH_FATE_RUNS:-3}

# start_job OUT: tprun -n 4 -H a:2,b:2 of blocking ranks in the background; RANK_PIDS once all are ready.
start_job() {
    # ip netns exec execs tprun: $! is tprun itself.
    ip netns exec "$NS_A" "$TPRUN" --ssh "$SSH" -n 4 -H a:2,b:2 "$RANK_PROG" block >"$1.out" 2>"$1.err" &
    TP_PID=$!
    TEST_PIDS+=($TP_PID)
    for _ in $(seq 1 400); do
        [ "$(grep -c '^ready' "$1.out")" -ge 4 ] && break
        sleep 0.025
    done
    RANK_PIDS=$(sed -n 's/^ready rank [0-9]* of 4 pid \([0-9]*\) .*/\1/p' "$1.out")
    RANK2=$(sed -n 's/^ready rank 2 of 4 pid \([0-9]*\) .*/\1/p' "$1.out")
    [ "$(echo $RANK_PIDS | wc -w)" = 4 ]
}

median() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

agent_on_b() {
    local p
    for p in $(ip netns pids "$NS_B"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = tprun ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- '--agent' &&
            echo "$p"
    done
}

# fate_case NAME STATUS FIRST_LINE_PATTERN: runs the kill action ($KILL) RUNS times.
fate_case() {
    local name=$1 want_st=$2 pattern=$3 times= i ms st first before=$fails
    for i in $(seq 1 "$RUNS"); do
        step "$name ($i of $RUNS)"
        if ! start_job "$D/$name.$i"; then
            fail "$name: ranks never got ready: $(cat "$D/$name.$i.out" "$D/$name.$i.err")"
            return
        fi
        # In a block without stderr: bash prints a "Killed" notice when it sees tprun SIGKILLed, at its next command.
        {
            ms=$(kill_and_time "$(eval echo "\"$KILL\"")" $RANK_PIDS 2>&1)
            wait "$TP_PID"
        } 2>/dev/null
        st=$?
        first=$(grep -m1 '^tprun: ' "$D/$name.$i.err")
        [ "$ms" = never ] && fail "$name: ranks survived: $(leftovers)" && kill -KILL "$TP_PID" $RANK_PIDS
        [ "$st" = "$want_st" ] || fail "$name: tprun status $st, expected $want_st: $(cat "$D/$name.$i.err")"
        echo "$first" | grep -q "$pattern" || fail "$name: first line '$first', expected /$pattern/"
        wait_no_leftovers 5 || fail "$name: left running: $(leftovers)"
        times="$times $ms"
    done
    [ "$fails" = "$before" ] && pass "$name: every rank gone in$times ms (median $(echo $times | median) ms); $first"
}

KILL='kill -KILL $RANK2'
fate_case "rank 2 SIGKILLed on b" 137 '^tprun: rank 2 (host b, pid [0-9]*) killed by signal 9 (SIGKILL)$'
KILL='kill -KILL $(agent_on_b)'
fate_case "agent on b killed" 137 "^tprun: host b: the agent's connection ended before ranks 2-3 there ended"
KILL='kill -KILL $TP_PID'
fate_case "tprun killed" 137 ''

# Host b vanishes: its links go down; the heartbeat timeout ends every rank, on both sides.
export TP_HEARTBEAT_TIMEOUT=0.5
KILL='ip -n $NS_B link set mgmt0 down; ip -n $NS_B link set rail0 down; ip -n $NS_B link set rail1 down'
RUNS=1 fate_case "host b vanished" 70 '^tprun: rank [01] (host a, pid [0-9]*) exited with status 70'
grep -q "peer rank [23] (host b, pid [0-9]*) failed: sent nothing for 0.5 s" "$D/host b vanished.1.err" &&
    pass "host b vanished: the survivors name the silent rank on b" ||
    fail "host b vanished: no survivor names b: $(cat "$D/host b vanished.1.err")"
finish
