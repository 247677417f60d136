#!/bin/bash
# Hierarchical collectives (TP_COLL_HIER) on namespace hosts a, b, c, d (tests/netns_lib.sh): every collective bit
# for bit against coll_check's rank-order references (the flat path's results) with 2 ranks per host, placed by slot
# (a host's ranks consecutive: the chains of all_reduce and reduce_scatter) and by node (interleaved: leaders trade
# raw vectors, large all_reduce and reduce_scatter flat), 3 and 4 hosts (the final slice goes round), an uneven host;
# that the comm and each collective the shape allows really went hierarchical (and flat with TP_COLL_HIER=off); a bad
# TP_COLL_HIER refused before launch. tests/coll_hier_local.sh runs the conformance suite this way on one machine.
NETNS_HOSTS="a b c d"
. "$(dirname "$0")/netns_lib.sh"
# Bits are checked here, not fate (tests/coll_hier_local.sh says why the heartbeat is longer).
export TP_HEARTBEAT_TIMEOUT=${TP_HEARTBEAT_TIMEOUT:-30}

ALL_OPS="all_gather all_gatherv all_reduce reduce_scatter broadcast"
# hier_case NAME WANT_LINE OPS ARGS...: coll_check over ARGS (tprun's placement), TP_COLL_HIER=on, small parts; OPS
# (and no other collective) must log their first hierarchical call on comm 0 at every rank.
hier_case() {
    local name=$1 want=$2 ops=" $3 " out st op got n wrong=""
    shift 3
    step "coll_check: $name"
    out=$(TP_COLL_HIER=on TP_PART_BYTES=${PART:-4K} TP_LOG_LEVEL=debug tprun_on_a "$@" ./tests/coll_check --big 2>&1)
    st=$?
    n=$(echo "$out" | sed -n 's/^coll_check: \([0-9]*\) ranks.*/\1/p')
    for op in $ALL_OPS; do
        got=$(echo "$out" | grep -c "coll: comm 0: $op goes hierarchical (first: ")
        case $ops in *" $op "*) [ "$got" = "${n:-?}" ] ;; *) [ "$got" = 0 ] ;; esac || wrong="$wrong $op:$got"
    done
    if [ $st = 0 ] && echo "$out" | grep -q '^coll_check: .* all match' && echo "$out" | grep -q "coll: $want" &&
        [ -z "$wrong" ]; then
        pass "$name: $(echo "$out" | grep -m1 '^coll_check:') (hierarchical:$ops)"
    else
        fail "$name: status $st, want a line /coll: $want/, hierarchical:$ops, ranks that said so:$wrong:" \
            "$(echo "$out" | grep -v ' boot:\| transport:\| iface:' | tail -8)"
    fi
}
hier_case "2 hosts x 2 ranks, consecutive" \
    "comm [0-9]*: 4 ranks on 2 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, hierarchical" "$ALL_OPS" \
    -n 4 -H a:2,b:2
hier_case "2 hosts x 2 ranks, interleaved (--map-by node)" \
    "comm [0-9]*: 4 ranks on 2 hosts (as many on each, interleaved): TP_COLL_HIER=on, hierarchical" \
    "all_gather all_gatherv all_reduce broadcast" -n 4 -H a:2,b:2 --map-by node
PART=64K hier_case "2 hosts x 2 ranks, 64 KiB parts" "comm [0-9]*: .*: TP_COLL_HIER=on, hierarchical" "$ALL_OPS" \
    -n 4 -H a:2,b:2
hier_case "3 hosts x 2 ranks" "comm [0-9]*: 6 ranks on 3 hosts (as many on each, consecutive ranks): .*, hierarchical" \
    "$ALL_OPS" -n 6 -H a:2,b:2,c:2
hier_case "4 hosts x 2 ranks" "comm [0-9]*: 8 ranks on 4 hosts (as many on each, consecutive ranks): .*, hierarchical" \
    "$ALL_OPS" -n 8 -H a:2,b:2,c:2,d:2
hier_case "uneven: 2 ranks on a, 1 on b" "comm [0-9]*: 3 ranks on 2 hosts (uneven, consecutive ranks): .*, hierarchical" \
    "all_reduce broadcast" -n 3 -H a:2,b:1

step "TP_COLL_HIER=off: flat"
out=$(TP_COLL_HIER=off TP_PART_BYTES=4K TP_LOG_LEVEL=debug tprun_on_a -n 4 -H a:2,b:2 ./tests/coll_check 2>&1)
[ $? = 0 ] && echo "$out" | grep -q '^coll_check: .* all match' &&
    echo "$out" | grep -q "coll: comm [0-9]*: .*TP_COLL_HIER=off, flat" && ! echo "$out" | grep -q "goes hierarchical" &&
    pass "TP_COLL_HIER=off: flat, all match" ||
    fail "TP_COLL_HIER=off: $(echo "$out" | grep -v ' boot:\| transport:\| iface:' | tail -5)"

step "a bad TP_COLL_HIER"
out=$(TP_COLL_HIER=sometimes tprun_on_a -n 4 -H a:2,b:2 "$RANK_PROG" boot 2>&1)
st=$?
[ $st = 2 ] && [ "$(echo "$out" | grep -c .)" = 1 ] &&
    echo "$out" | grep -q 'TP_COLL_HIER: expected auto, on or off, got "sometimes"' &&
    pass "TP_COLL_HIER=sometimes refused (status 2): $out" || fail "bad TP_COLL_HIER: status $st: $out"
wait_no_leftovers 5 && pass "nothing left running on any host" || fail "left running: $(leftovers)"
finish
