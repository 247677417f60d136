#!/bin/bash
# A rank SIGKILLed in the middle of hierarchical calls (4 MiB all_reduce, all_gather, reduce_scatter and broadcast,
# 2 hosts x 2 ranks on namespace hosts, tests/netns_lib.sh): every survivor ends with 70 (the JSON summary), tprun
# names the killed rank, nothing is left running on any host, and every rank logged that each of the four went
# hierarchical. Once for a victim on host b, once for rank 0's host-mate on a.
. "$(dirname "$0")/netns_lib.sh"

# fate_case VICTIM: the job, VICTIM's pid SIGKILLed once every rank has finished a pair of calls.
fate_case() {
    local victim=$1 f=$D/fate.$1 pids vpid ms st
    step "SIGKILL rank $victim mid-call"
    # ip netns exec execs tprun: $! is tprun itself.
    TP_COLL_HIER=on TP_LOG_LEVEL=debug ip netns exec "$NS_A" "$TPRUN" --ssh "$SSH" --json-summary "$f.json" -n 4 -H a:2,b:2 \
        ./tests/coll_hier_loop >"$f.out" 2>"$f.err" &
    local tp=$!
    TEST_PIDS+=($tp)
    for _ in $(seq 1 1200); do # test-only polling for the ranks' ready lines (up to 60 s under load)
        [ "$(grep -c '^ready' "$f.out")" -ge 4 ] && break
        alive "$tp" || break
        sleep 0.05
    done
    pids=$(sed -n 's/^ready rank [0-9]* of 4 pid \([0-9]*\)$/\1/p' "$f.out")
    vpid=$(sed -n "s/^ready rank $victim of 4 pid \\([0-9]*\\)\$/\\1/p" "$f.out")
    if [ "$(echo $pids | wc -w)" != 4 ] || [ -z "$vpid" ]; then
        fail "rank $victim: the ranks never got ready: $(cat "$f.out" "$f.err" | tail -5)"
        return
    fi
    ms=$(kill_and_time "kill -KILL $vpid" $pids)
    wait "$tp" 2>/dev/null
    st=$?
    [ "$ms" = never ] && fail "rank $victim: ranks survived 10 s: $(leftovers)"
    [ "$st" = 137 ] || fail "rank $victim: tprun status $st, expected 137: $(tail -5 "$f.err")"
    local codes
    codes=$(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join("%d:%s" % (r["rank"], r["status"]) for r in j["ranks"]), j["first_failure"])' "$f.json" 2>&1)
    local want="" r
    for r in 0 1 2 3; do [ $r = "$victim" ] && want="$want $r:137" || want="$want $r:70"; done
    [ "$codes" = "${want# } $victim" ] || fail "rank $victim: rank statuses and first failure '$codes', want '${want# } $victim'"
    grep -q "^tprun: rank $victim (host [ab], pid $vpid) killed by signal 9 (SIGKILL)" "$f.err" ||
        fail "rank $victim: tprun's first line: $(grep -m1 '^tprun: ' "$f.err")"
    wait_no_leftovers 5 || fail "rank $victim: left running: $(leftovers)"
    [ "$(grep -c 'coll: comm 0: 4 ranks on 2 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, hierarchical$' "$f.err")" = 4 ] ||
        fail "rank $victim: not every rank logged that its calls were hierarchical"
    local op
    for op in all_reduce all_gather reduce_scatter broadcast; do
        [ "$(grep -c "coll: comm 0: $op goes hierarchical (first: f32 " "$f.err")" = 4 ] ||
            fail "rank $victim: not every rank logged that its $op calls were hierarchical"
    done
    [ "$fails" = 0 ] && pass "rank $victim SIGKILLed: every rank gone in $ms ms, survivors 70, tprun 137: $(grep -m1 '^tprun: ' "$f.err")"
}
fate_case 2
fate_case 1
finish
