#!/bin/bash
# Stray and hostile connections to the bootstrap port are refused and logged; the job still completes. Then a
# flood of idle connections, made before the real ranks start (torchrun-style on MASTER_PORT, and on tprun's own
# bootstrap port): the job boots about when their handshake deadline (1 s) drops them, with a bounded log.
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

# flooded NAME SECONDS ERRFILE: the job booted within SECONDS of the real ranks' start, logging a few lines at most.
flooded() {
    local took=$2 lines
    lines=$(grep -c 'boot: warning: refused' "$3")
    awk -v t="$took" 'BEGIN { exit !(t < 5) }' && pass "$1: booted ${took} s after the ranks started" ||
        fail "$1: booted ${took} s after the ranks started, not within 5 s"
    [ "$lines" -le 12 ] && grep -q "refused [0-9]* connections\{0,1\} that did not prove the job's key within 1 s" "$3" &&
        pass "$1: $lines lines of refusals, late ones counted in one line" ||
        fail "$1: $lines lines of refusals (at most 12, late ones in one count): $(head -20 "$3")"
}
# idle_flood PORT: holds 70 idle connections to 127.0.0.1:PORT (pid in FLOOD_PID) once all have connected.
idle_flood() {
    timeout 60 "$INTRUDER" "127.0.0.1:$1" idle 70 >"$TEST_DIR/flood.out" 2>&1 &
    FLOOD_PID=$!
    STARTED_PIDS+=($!)
    for _ in $(seq 1 1000); do grep -q '^connected 70' "$TEST_DIR/flood.out" && return 0; sleep 0.01; done
    fail "the intruder could not connect: $(cat "$TEST_DIR/flood.out")"
    return 1
}
now() { date +%s.%N; }

# torchrun-style: rank 0 listens on MASTER_PORT; the flood comes before rank 1 (the old code refused it until
# TP_BOOT_TIMEOUT, one log line per refusal).
export TP_BOOT_TIMEOUT=20
port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$RANK_PROG" boot \
    >"$TEST_DIR/f.0.out" 2>"$TEST_DIR/f.0.err" &
root=$!
STARTED_PIDS+=($root)
for _ in $(seq 1 1000); do ss -ltnH "sport = :$port" | grep -q . && break; sleep 0.01; done
if idle_flood "$port"; then
    t0=$(now)
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 30 "$RANK_PROG" boot \
        >"$TEST_DIR/f.1.out" 2>"$TEST_DIR/f.1.err"
    st1=$?
    wait_status $root
    [ "$ST$st1" = 00 ] && pass "flood on MASTER_PORT: the job completed" ||
        fail "flood on MASTER_PORT: job failed: $ST $st1: $(tail -3 "$TEST_DIR"/f.*.err)"
    flooded "flood on MASTER_PORT" "$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')" "$TEST_DIR/f.0.err"
fi
kill "$FLOOD_PID" 2>/dev/null

# tprun: its bootstrap port (TP_BOOT_ADDR) takes the flood before either rank calls tp_init.
gate="$TEST_DIR/go"
timeout 40 "$TPRUN" -n 2 sh -c 'echo "$TP_BOOT_ADDR" >"$0.addr.$TP_RANK"; until [ -e "$0" ]; do sleep 0.01; done
    exec "$1" boot' "$gate" "$RANK_PROG" >"$TEST_DIR/t.out" 2>"$TEST_DIR/t.err" &
job=$!
STARTED_PIDS+=($job)
for _ in $(seq 1 1000); do [ -s "$gate.addr.0" ] && break; sleep 0.01; done
addr=$(cut -d, -f1 "$gate.addr.0")
if idle_flood "${addr##*:}"; then
    t0=$(now)
    : >"$gate"
    wait_status $job
    [ "$ST" = 0 ] && pass "flood on tprun's bootstrap port: the job completed" ||
        fail "flood on tprun's bootstrap port: job failed: $ST: $(tail -3 "$TEST_DIR/t.err")"
    flooded "flood on tprun's bootstrap port" "$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')" "$TEST_DIR/t.err"
fi
kill "$FLOOD_PID" 2>/dev/null
finish
