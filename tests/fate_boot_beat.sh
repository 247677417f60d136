#!/bin/bash
# Heartbeats during the bootstrap: ranks that got their table run fate while rank 0 still sends the others theirs
# (TP_TEST_TABLE_DELAY makes each send slow, as a loaded machine does), so they must not count rank 0 as silent;
# every rank boots and finalizes. Without a launcher.
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
finish
