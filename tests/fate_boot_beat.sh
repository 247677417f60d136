#!/bin/bash
# Silence during the bootstrap: ranks that got their table run fate while rank 0 still sends the others theirs and
# has not started its own (TP_TEST_TABLE_DELAY makes each send slow, as a loaded machine does: at 256 ranks on 2
# vCPUs rank 0 was starved for over 1 s there). Until a peer's fate has been heard, TP_BOOT_TIMEOUT bounds its
# silence, not TP_HEARTBEAT_TIMEOUT: every rank boots and finalizes; and a rank 0 slower than TP_BOOT_TIMEOUT is
# named by that limit. Without a launcher.
. "$(dirname "$0")/runtime_lib.sh"
N=5
port=$(free_port)
# 4 tables at 0.5 s each: the first rank served waits 2 s, twice the heartbeat timeout, for rank 0's fate thread.
TP_HEARTBEAT_TIMEOUT=1 TP_TEST_TABLE_DELAY=0.5 torch_job "$N" "$port" "$TEST_DIR/beat" "$RANK_PROG" boot
ok=1
for ((r = 0; r < N; r++)); do
    wait_status "${JOB_PIDS[$r]}"
    if [ "$ST" != 0 ]; then
        ok=0
        fail "rank $r: status $ST: $(cat "$TEST_DIR/beat.$r.err")"
    fi
done
[ $ok = 1 ] && pass "$N ranks booted while rank 0 sent its tables slowly"

# 4 tables at 2 s each against a 3 s boot timeout: the first ranks served name rank 0 by the bootstrap's limit.
port=$(free_port)
TP_HEARTBEAT_TIMEOUT=1 TP_BOOT_TIMEOUT=3 TP_TEST_TABLE_DELAY=2 torch_job "$N" "$port" "$TEST_DIR/slow" "$RANK_PROG" boot
named=0
for ((r = 0; r < N; r++)); do
    wait_status "${JOB_PIDS[$r]}"
    grep -q "peer rank 0 .* failed: sent nothing for 3 s after the bootstrap (its fate never started: stuck in tp_init; TP_BOOT_TIMEOUT)" \
        "$TEST_DIR/slow.$r.err" && [ "$ST" = 70 ] && named=$((named + 1))
done
if [ "$named" -ge 1 ]; then pass "$named ranks named rank 0 by TP_BOOT_TIMEOUT when its fate did not start in time"
else fail "no rank named rank 0 by TP_BOOT_TIMEOUT: $(cat "$TEST_DIR"/slow.1.err)"; fi
finish
