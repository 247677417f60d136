#!/bin/bash
# Stray and hostile connections to the bootstrap port are refused and logged; the job still completes.
. "$(dirname "$0")/runtime_lib.sh"

port=$(free_port)
export TP_JOB_KEY=00112233445566778899aabbccddeeff
RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$RANK_PROG" boot \
    >"$TEST_DIR/j.0.out" 2>"$TEST_DIR/j.0.err" &
root=$!
STARTED_PIDS+=($root)
ipids=()
for how in garbage wrongkey silent badrank oversized badrecord; do
    for _ in $(seq 1 200); do # until rank 0 listens
        timeout 10 "$INTRUDER" "127.0.0.1:$port" "$how" >"$TEST_DIR/i.$how" 2>&1 &
        p=$!
        sleep 0.02
        grep -q "connect" "$TEST_DIR/i.$how" 2>/dev/null || break
        wait $p
    done
    ipids+=($p)
    STARTED_PIDS+=($p)
done
sleep 0.2 # let rank 0 read every intruder before the real ranks arrive (not needed for correctness)
for r in 1 2; do
    RANK=$r WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$RANK_PROG" boot \
        >"$TEST_DIR/j.$r.out" 2>"$TEST_DIR/j.$r.err" &
    eval "pid$r=\$!"
    STARTED_PIDS+=($!)
done
wait_status $root; st0=$ST
wait_status "$pid1"; st1=$ST
wait_status "$pid2"; st2=$ST
[ "$st0$st1$st2" = 000 ] && pass "job completed despite intruders" ||
    fail "job failed: $st0 $st1 $st2: $(cat "$TEST_DIR"/j.*.err)"
err=$(cat "$TEST_DIR/j.0.err")
check() { echo "$err" | grep -q "$1" && pass "$2" || fail "$2: not logged: $1"; }
check "refused connection from 127.0.0.1:[0-9]*: not the tp protocol (first bytes 47 45 54 20" "garbage refused"
check "refused connection from 127.0.0.1:[0-9]*: closed during the handshake (it does not know this job's key" \
    "wrong job key refused"
check "refused connection from 127.0.0.1:[0-9]*: claims rank 1000, not in 1..2" "out-of-range rank refused"
check "dropped connection from 127.0.0.1:[0-9]* (rank 1): message of 2147483647 bytes exceeds the limit" \
    "oversized record refused"
check "dropped connection from 127.0.0.1:[0-9]* (rank 1): record has an unknown field \"bogus\"" \
    "malformed record refused"
for p in "${ipids[@]}"; do wait "$p" 2>/dev/null; done
finish
