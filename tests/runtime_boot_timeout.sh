#!/bin/bash
# Bootstrap timeout: the missing rank is named while waiting and in every rank's failure.
. "$(dirname "$0")/runtime_lib.sh"

port=$(free_port)
export TP_BOOT_TIMEOUT=1 TP_BOOT_REPORT=0.3
pids=()
for r in 0 1 3; do
    RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 20 "$RANK_PROG" boot \
        >"$TEST_DIR/m.$r.out" 2>"$TEST_DIR/m.$r.err" &
    pids+=($!)
    STARTED_PIDS+=($!)
done
i=0
for r in 0 1 3; do
    wait_status "${pids[$i]}"; st=$ST
    i=$((i + 1))
    [ "$st" != 0 ] && grep -q "bootstrap timed out after 1 s: rank 2 never checked in (3/4 did)" "$TEST_DIR/m.$r.err" &&
        pass "rank $r names missing rank 2" || fail "rank $r: status $st: $(cat "$TEST_DIR/m.$r.err")"
done
grep -q "waiting for rank 2: 3/4 checked in" "$TEST_DIR/m.0.err" && pass "rank 0 says who it waits for" ||
    fail "no waiting message: $(cat "$TEST_DIR/m.0.err")"

# Rank 0 never starts: the others say they could not check in with rank 0.
port=$(free_port)
RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TP_BOOT_TIMEOUT=0.5 timeout 20 "$RANK_PROG" boot \
    >"$TEST_DIR/r.out" 2>"$TEST_DIR/r.err"
st=$?
[ $st != 0 ] && grep -q "could not check in with rank 0's bootstrap at 127.0.0.1:$port" "$TEST_DIR/r.err" &&
    pass "rank 0 missing is named" || fail "rank 0 missing: status $st: $(cat "$TEST_DIR/r.err")"

# TP_BOOT_ADDR with several addresses: one that refuses gives way to the next, with a warning naming it; a
# malformed later entry is an error at once.
port=$(free_port) dead=$(free_port)
# tp_env execs (run it in a subshell): backgrounded, $! is then the rank's timeout, not a subshell.
tp_env() { exec env TP_RANK=$1 TP_WORLD_SIZE=2 TP_LOCAL_RANK=$1 TP_LOCAL_WORLD_SIZE=2 TP_NODE_RANK=0 TP_JOB_ID=alts \
    TP_JOB_KEY=00112233445566778899aabbccddeeff TP_BOOT_ADDR=$2 timeout 20 "$RANK_PROG" boot; }
tp_env 0 127.0.0.1:$port >"$TEST_DIR/a0.out" 2>"$TEST_DIR/a0.err" &
STARTED_PIDS+=($!)
(tp_env 1 127.0.0.1:$dead,127.0.0.1:$port >"$TEST_DIR/a1.out" 2>"$TEST_DIR/a1.err")
st=$?
wait
[ $st = 0 ] && grep -q "^ready rank 1 of 2" "$TEST_DIR/a1.out" &&
    grep -q "boot: warning: rank 0's bootstrap at 127.0.0.1:$dead did not answer (Connection refused); checked in at 127.0.0.1:$port" "$TEST_DIR/a1.err" &&
    pass "TP_BOOT_ADDR's second address used when the first refuses, with a warning" ||
    fail "TP_BOOT_ADDR fallback: status $st: $(cat "$TEST_DIR/a1.out" "$TEST_DIR/a1.err")"
out=$(tp_env 1 127.0.0.1:$port,127.0.0.1:x 2>&1)
st=$?
[ $st != 0 ] && echo "$out" | grep -qF 'TP_BOOT_ADDR: expected host:port[,host:port...] with ports 1-65535, got "127.0.0.1:'"$port"',127.0.0.1:x" (entry 2 has a port that is not digits)' &&
    pass "a malformed second TP_BOOT_ADDR entry is refused by name" || fail "bad TP_BOOT_ADDR entry: status $st: $out"

if [ -x "$TPRUN" ]; then
    # Under tprun the listener exists before any rank: a rank that never calls tp_init is named by rank 0.
    out=$(TP_BOOT_TIMEOUT=1 timeout 20 "$TPRUN" -n 3 sh -c \
        'if [ "$TP_RANK" = 1 ]; then sleep 3; else exec '"$RANK_PROG"' boot; fi' 2>&1)
    st=$?
    [ $st != 0 ] && echo "$out" | grep -q "rank 1 never checked in (2/3 did)" && pass "tprun: missing rank named" ||
        fail "tprun: missing rank: status $st: $out"
fi
finish
