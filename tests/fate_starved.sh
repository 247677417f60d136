#!/bin/bash
# A starved fate thread is not a hung one. Rank 0's fate thread spends TP_TEST_FATE_BURN of CPU before each
# heartbeat round (as one serving thousands of peers does) while rank 0 is pinned to one CPU beside 8 busy loops: it
# is runnable but gets about 1/9 of that CPU, so its heartbeats come over TP_HEARTBEAT_TIMEOUT apart, as rank 0's did
# at 256 ranks on 2 vCPUs. Its peers (on this kernel) see it waiting for a CPU and the job ends cleanly. A fate
# thread that spins (its burn never ends) is still named within a heartbeat interval of CPU past the timeout, and one
# starved past TP_BOOT_TIMEOUT is named by that limit. Without a launcher; a stopped rank: tests/runtime_fate.sh.
. "$(dirname "$0")/runtime_lib.sh"
ENGINE=./tests/fate_engine
N=3
CPU=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
LOOPS=()

# crowd: 8 busy loops on CPU $CPU (rank 0's); uncrowd ends them.
crowd() {
    for _ in 1 2 3 4 5 6 7 8; do
        taskset -c "$CPU" bash -c 'while :; do :; done' &
        LOOPS+=($!)
        STARTED_PIDS+=($!)
    done
}
uncrowd() {
    local p
    for p in "${LOOPS[@]}"; do
        disown "$p"
        kill -9 "$p" 2>/dev/null
    done
    LOOPS=()
}

# job NAME BURN PIN HOLD_MS: N ranks of fate_engine hold; rank 0 burns BURN s of CPU before each heartbeat round and,
# with PIN=1, runs on CPU $CPU only. Waits until every rank is ready.
job() {
    local name=$1 burn=$2 pin=$3 hold=$4
    torch_job "$N" "$(free_port)" "$TEST_DIR/$name" bash -c \
        'if [ "$RANK" = 0 ]; then export TP_TEST_FATE_BURN=$0; [ "$1" = 1 ] && exec taskset -c "$2" "${@:3}"; fi
         exec "${@:3}"' "$burn" "$pin" "$CPU" "$ENGINE" hold "$hold"
    wait_ready "$N" "$TEST_DIR/$name" || fail "$name: ranks never got ready: $(cat "$TEST_DIR/$name".*.err)"
}

# 1. Starved, not hung: every rank finalizes; a peer saw rank 0's fate thread wait for a CPU past the timeout.
step "starved rank 0"
TP_LOG_LEVEL=debug TP_HEARTBEAT_TIMEOUT=1 job starved 0.2 1 5000
crowd
ok=1
for ((r = 0; r < N; r++)); do
    wait_status "${JOB_PIDS[$r]}"
    [ "$ST" = 0 ] || { ok=0; fail "starved: rank $r: status $ST: $(grep -m3 'error' "$TEST_DIR/starved.$r.err")"; }
done
uncrowd
seen=$(cat "$TEST_DIR"/starved.[12].err | grep -c "peer rank 0 sent nothing for .* s, but its thread [0-9]* (.*) is runnable: it waits for a CPU")
if [ $ok = 1 ] && [ "$seen" -ge 1 ]; then pass "a starved rank 0 (silent past the timeout $seen times) is not named"
elif [ $ok = 1 ]; then fail "starved: rank 0 was never silent past the timeout: the test did not starve it"; fi

# rank0_named NAME REASON: whether ranks 1 and 2 exited 70 naming rank 0 with REASON (a grep pattern); then ends
# rank 0, whose fate thread still burns.
rank0_named() {
    local name=$1 reason=$2 vpid=${JOB_PIDS[0]} r ok=0
    for r in 1 2; do
        wait_status "${JOB_PIDS[$r]}"
        [ "$ST" = 70 ] && grep -q "peer rank 0 (host [^,]*, pid $vpid) failed: $reason" "$TEST_DIR/$name.$r.err" ||
            { ok=1; fail "$name: rank $r: status $ST: $(cat "$TEST_DIR/$name.$r.err")"; }
    done
    disown "$vpid" # its end is the test's doing: no "Killed" notice from bash
    kill -9 "$vpid" 2>/dev/null
    return $ok
}

# 2. A fate thread that spins: named by the CPU it got while silent, long before TP_BOOT_TIMEOUT (30 s).
step "spinning fate thread"
start=$SECONDS
TP_BOOT_TIMEOUT=30 TP_HEARTBEAT_TIMEOUT=1 job spin 1000 0 30000
if rank0_named spin "sent nothing for [0-9.]* s although its fate thread ran for [0-9.]* s of CPU meanwhile (hung in a loop; TP_HEARTBEAT_TIMEOUT)"; then
    took=$((SECONDS - start))
    [ $took -lt 20 ] && pass "a spinning fate thread is named as hung ($took s)" ||
        fail "spin: named after $took s, not within a heartbeat interval of CPU"
fi

# 3. Starved past TP_BOOT_TIMEOUT (2 s): named by that limit.
step "starved past TP_BOOT_TIMEOUT"
TP_BOOT_TIMEOUT=2 TP_HEARTBEAT_TIMEOUT=1 job long 0.5 1 30000
crowd
rank0_named long "sent nothing for 2 s while its fate thread waited for a CPU (an overloaded host; TP_BOOT_TIMEOUT)" &&
    pass "a fate thread starved past TP_BOOT_TIMEOUT is named by it"
uncrowd
finish
