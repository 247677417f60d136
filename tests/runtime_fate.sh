#!/bin/bash
# Fate: a rank that dies, exits without tp_finalize or stops answering ends every other rank fast, with the
# failed rank named; callbacks run first. Without any launcher, and under tprun.
. "$(dirname "$0")/runtime_lib.sh"

# pidfds PID: how many pidfds the process holds.
pidfds() { find "/proc/$1/fd" -lname 'anon_inode:\[pidfd\]' 2>/dev/null | wc -l; }

# fate_case NAME N VICTIM SIGNAL EXPECT [R:PIDFDS ...]: torchrun-style job of spinning ranks; the test signals the
# victim. Each R:PIDFDS says how many peers rank R watches through pidfds once all are ready.
fate_case() {
    local name=$1 n=$2 victim=$3 sig=$4 expect=$5 port want
    shift 5
    port=$(free_port)
    torch_job "$n" "$port" "$TEST_DIR/$name" "$RANK_PROG" spin
    if ! wait_ready "$n" "$TEST_DIR/$name"; then
        fail "$name: ranks never got ready: $(cat "$TEST_DIR/$name".*.err)"
        return
    fi
    for want in "$@"; do
        local got
        got=$(pidfds "${JOB_PIDS[${want%:*}]}")
        [ "$got" = "${want#*:}" ] && pass "$name: rank ${want%:*} watches ${want#*:} peers through pidfds" ||
            fail "$name: rank ${want%:*} holds $got pidfds, expected ${want#*:}"
    done
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
# Rank 0 watches its 15 local peers through pidfds; the others rank 0 and 4 neighbours each side around the ring,
# so most survivors of rank 12 (all but 8-11, 13-15) learn of it from rank 0's verdict.
fate_case kill16 16 12 KILL "it ended without tp_finalize" 0:15 5:9 12:8 3:8
fate_case kill5 5 2 KILL "it ended without tp_finalize" 0:4 1:4 4:4
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
