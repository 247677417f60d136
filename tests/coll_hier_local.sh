#!/bin/bash
# Hierarchical collectives on one machine: each rank's TP_HOST names a pretend host (records group ranks by it), so
# TP_COLL_HIER=on runs the hierarchical algorithms over shm and over tcp; coll_check --conformance (every collective,
# type, op, size and sub-comm) must match its rank-order references bit for bit, in every placement: consecutive
# (the chain, 2, 3 and 4 hosts, 4 ranks a host), interleaved (raw vectors between leaders), uneven. Every rank must log
# the choice the placement calls for, and which collectives went hierarchical (reduce_scatter and broadcast among
# them where the shape allows). tests/coll_hier.sh does the same on real namespace hosts (root only).
set -u
TPRUN=${TPRUN:-./tprun}
PROG=${PROG:-./tests/coll_check}
export TP_COLL_HIER=on TP_PART_BYTES=${TP_PART_BYTES:-4K} TP_LOG_LEVEL=debug
# Bits are checked here, not fate: a 1 s heartbeat failed runs on the shared 2-core machine at load 70-80 under
# nice 19 ('sent nothing for 1 s'), a rank's heartbeat thread starved of CPU while its peers waited in a call.
export TP_HEARTBEAT_TIMEOUT=${TP_HEARTBEAT_TIMEOUT:-30}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# hier_ops OUT N OPS: every collective goes flat or hierarchical as the placement calls for: each of OPS (the rest of
# ALL_OPS not) logged its first hierarchical call on comm 0 at each of the N ranks; prints what differs.
ALL_OPS="all_gather all_gatherv all_reduce reduce_scatter broadcast"
hier_ops() {
    local out=$1 n=$2 ops=" $3 " op got want
    for op in $ALL_OPS; do
        got=$(echo "$out" | grep -c "^tp rank [0-9]* ([^)]*) coll: comm 0: $op goes hierarchical (first: ")
        case $ops in *" $op "*) want=$n ;; *) want=0 ;; esac
        [ "$got" = "$want" ] || echo "$op hierarchical on $got of $n ranks, want $want"
    done
}

# layout NAME N HOST_EXPR WANT TRANSPORT OPS: N ranks, rank r on host h$((HOST_EXPR)) (r is TP_RANK), WANT the
# world's line each rank must log, OPS the collectives that go hierarchical there.
layout() {
    local name=$1 n=$2 expr=$3 want=$4 tr=$5 ops=$6 out rc
    out=$(TP_TRANSPORTS=$tr timeout -k 5 "${HIER_TIMEOUT_S:-200}" "$TPRUN" -n "$n" \
        sh -c "r=\$TP_RANK; TP_HOST=h\$(($expr)) exec $PROG --conformance" 2>&1)
    rc=$?
    local said wrong
    said=$(echo "$out" | grep -c "^tp rank [0-9]* ([^)]*) coll: comm 0: $want$")
    wrong=$(hier_ops "$out" "$n" "$ops")
    if [ $rc -ne 0 ] || ! echo "$out" | grep -q "^coll_check: $n ranks, .*: all match$" || [ "$said" -ne "$n" ] ||
        [ -n "$wrong" ]; then
        fail "$name over $tr: status $rc, $said of $n ranks logged '$want'; $wrong"
        echo "$out" | grep ' fate: \|: error: \|^tprun\|FAIL' | grep -v 'cannot reduce' | head -20
    else
        echo "ok: $name over $tr: $(echo "$out" | grep '^coll_check:') (hierarchical: $ops)"
    fi
}
# Consecutive ranks, as many on each host: every collective; interleaved: no reduce_scatter (the fold would cross
# hosts at every rank); uneven: all_reduce and broadcast only; one rank a host: none.
for tr in shm tcp; do
    layout "2 hosts x 2, consecutive" 4 'r / 2' \
        "4 ranks on 2 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, hierarchical" $tr "$ALL_OPS"
    layout "2 hosts x 2, interleaved" 4 'r % 2' \
        "4 ranks on 2 hosts (as many on each, interleaved): TP_COLL_HIER=on, hierarchical" $tr \
        "all_gather all_gatherv all_reduce broadcast"
    layout "3 hosts x 2, consecutive" 6 'r / 2' \
        "6 ranks on 3 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, hierarchical" $tr "$ALL_OPS"
done
layout "2 hosts x 4, consecutive" 8 'r / 4' \
    "8 ranks on 2 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, hierarchical" shm "$ALL_OPS"
layout "4 hosts x 2, consecutive" 8 'r / 2' \
    "8 ranks on 4 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, hierarchical" tcp "$ALL_OPS"
layout "4 hosts x 2, interleaved" 8 'r % 4' \
    "8 ranks on 4 hosts (as many on each, interleaved): TP_COLL_HIER=on, hierarchical" shm \
    "all_gather all_gatherv all_reduce broadcast"
layout "uneven: 3 on h0, 2 on h1" 5 'r / 3' \
    "5 ranks on 2 hosts (uneven, consecutive ranks): TP_COLL_HIER=on, hierarchical" shm "all_reduce broadcast"
layout "one rank a host" 3 'r' "3 ranks on 3 hosts (as many on each, consecutive ranks): TP_COLL_HIER=on, flat" shm ""
[ "$fails" -eq 0 ]
