#!/bin/bash
# Settings agreement: a mismatch fails every rank with one message naming the setting, values and ranks.
. "$(dirname "$0")/runtime_lib.sh"

port=$(free_port)
pids=()
for r in 0 1 2 3; do
    pb=4M
    [ $r = 3 ] && pb=1M
    TP_PART_BYTES=$pb RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 20 "$RANK_PROG" boot \
        >"$TEST_DIR/p.$r.out" 2>"$TEST_DIR/p.$r.err" &
    pids+=($!)
    STARTED_PIDS+=($!)
done
for r in 0 1 2 3; do
    wait_status "${pids[$r]}"; st=$ST
    [ "$st" != 0 ] && grep -q "setting part_bytes differs: 4194304 on ranks 0-2, 1048576 on rank 3" \
        "$TEST_DIR/p.$r.err" && ! grep -q '^ready' "$TEST_DIR/p.$r.out" &&
        pass "part_bytes mismatch on rank $r" || fail "rank $r: status $st: $(cat "$TEST_DIR/p.$r.err")"
done

if [ -x "$TPRUN" ]; then
    out=$(timeout 20 "$TPRUN" -n 4 sh -c 'exec '"$RANK_PROG"' boot --setting model=m$((TP_RANK % 2))' 2>&1)
    st=$?
    # The first rank to fail ends the job: tprun tears the others down, so at least one says it.
    n=$(echo "$out" | grep -c "setting model differs: m0 on ranks 0,2, m1 on ranks 1,3")
    [ $st != 0 ] && [ "$n" -ge 1 ] && ! echo "$out" | grep -q '^ready' && pass "engine setting mismatch under tprun" ||
        fail "engine setting mismatch: status $st, $n messages: $out"
    out=$(timeout 20 "$TPRUN" -n 3 "$RANK_PROG" boot --setting model=same 2>&1)
    [ $? = 0 ] && pass "equal engine settings agree" || fail "equal settings: $out"
    out=$(TP_HEARTBEAT_TIMEOUT=2 timeout 20 "$TPRUN" -n 2 sh -c \
        '[ "$TP_RANK" = 1 ] && export TP_HEARTBEAT_TIMEOUT=3; exec '"$RANK_PROG"' boot' 2>&1)
    echo "$out" | grep -q "setting heartbeat_timeout differs: 2 on rank 0, 3 on rank 1" &&
        pass "timeouts must match" || fail "heartbeat mismatch: $out"
    out=$(timeout 20 "$TPRUN" -n 2 sh -c '[ "$TP_RANK" = 1 ] && export TP_ERRORS=return; exec '"$RANK_PROG"' boot' 2>&1)
    echo "$out" | grep -q "setting errors differs: fatal on rank 0, return on rank 1" &&
        pass "TP_ERRORS must match" || fail "TP_ERRORS mismatch: $out"
    out=$(TP_ERRORS=later timeout 20 "$TPRUN" -n 2 "$RANK_PROG" boot 2>&1)
    [ $? != 0 ] && echo "$out" | grep -q 'TP_ERRORS: expected fatal or return, got "later"' &&
        pass "TP_ERRORS=later refused by name" || fail "TP_ERRORS=later: $out"
fi
finish
