#!/bin/bash
# Fate: a rank that dies, exits without tp_finalize or stops answering ends every other rank fast, with the
# failed rank named; callbacks run first. Without any launcher, and under tprun.
. "$(dirname "$0")/runtime_lib.sh"

# fate_case NAME N VICTIM SIGNAL EXPECT: torchrun-style job of spinning ranks; the test signals the victim.
fate_case() {
    local name=$1 n=$2 victim=$3 sig=$4 expect=$5 port
    port=$(free_port)
    torch_job "$n" "$port" "$TEST_DIR/$name" "$RANK_PROG" spin
    if ! wait_ready "$n" "$TEST_DIR/$name"; then
        fail "$name: ranks never got ready: $(cat "$TEST_DIR/$name".*.err)"
        return
    fi
    local vpid=${JOB_PIDS[$victim]}
    disown "$vpid" # its end is the test's doing: no "Killed" notice from bash
    kill "-$sig" "$vpid"
    local ok=1
    for ((r = 0; r < n; r++)); do
        [ $r = "$victim" ] && continue
        local st
        wait_status "${JOB_PIDS[$r]}"; st=$ST
        if [ "$st" != 70 ] || ! grep -q "peer rank $victim (host [^,]*, pid $vpid) failed: $expect" \
            "$TEST_DIR/$name.$r.err" || ! grep -q "^callback: rank $r saw peer $victim" "$TEST_DIR/$name.$r.out"; then
            ok=0
            fail "$name: rank $r: status $st: $(cat "$TEST_DIR/$name.$r.err" "$TEST_DIR/$name.$r.out")"
        fi
    done
    kill -9 "$vpid" 2>/dev/null
    [ $ok = 1 ] && pass "$name"
}

fate_case kill1 4 1 KILL "it ended without tp_finalize"
fate_case kill0 4 0 KILL "it ended without tp_finalize"
fate_case kill16 16 5 KILL "it ended without tp_finalize"
TP_HEARTBEAT_TIMEOUT=0.3 fate_case stop2 4 2 STOP "sent nothing for 0.3 s (stopped or hung"
TP_HEARTBEAT_TIMEOUT=0.3 fate_case stop0 3 0 STOP "sent nothing for 0.3 s (stopped or hung"

# A rank that exits 0 without tp_finalize is a failure too.
port=$(free_port)
torch_job 3 "$port" "$TEST_DIR/x" "$RANK_PROG" exit 1 0
for r in 0 2; do
    wait_status "${JOB_PIDS[$r]}"; st=$ST
    [ "$st" = 70 ] && grep -q "peer rank 1 .* failed: it ended without tp_finalize" "$TEST_DIR/x.$r.err" &&
        pass "exit without finalize seen by rank $r" || fail "exit without finalize, rank $r: status $st"
done

if [ -x "$TPRUN" ]; then
    out=$(timeout 30 "$TPRUN" -n 4 "$RANK_PROG" die 1 9 2>&1)
    st=$?
    first=$(echo "$out" | grep -m1 '^tprun')
    [ $st = 137 ] && echo "$first" | grep -q "rank 1 .*SIGKILL" &&
        pass "tprun: SIGKILL of rank 1 gives 137, named first" || fail "tprun SIGKILL: status $st: $out"
    out=$(TP_HEARTBEAT_TIMEOUT=0.3 timeout 30 "$TPRUN" -n 4 "$RANK_PROG" die 2 19 2>&1)
    st=$?
    n=$(echo "$out" | grep -c "peer rank 2 .* failed: sent nothing for 0.3 s")
    first=$(echo "$out" | grep -m1 '^tprun')
    [ $st = 70 ] && [ "$n" -ge 1 ] && echo "$first" | grep -q "rank 2 .*stopped answering" &&
        pass "tprun: a stopped rank fails the job, named first" ||
        fail "tprun SIGSTOP: status $st, $n survivor messages: $out"
fi
finish
