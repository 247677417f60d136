#!/bin/bash
# Desync (collective, count, type, root; dissemination against an all-peers algorithm) at 2-5 ranks (tcp: 2-3): with
# TP_ERRORS=return every rank's call fails naming the mismatch (the one rank 0 took first); by default (fatal) every
# rank exits 70 naming it. A peer
# SIGKILLed mid-call (over shm, then tcp): the others fail with TP_ERR_PEER_FAILED naming it, seen through the
# transport or its process (under a second with a 10 s heartbeat timeout; how fast is bench_failfast's business, not
# a test's). Forged frames on a real data connection (garbage over both; an impossible size, rewritten in sendmsg, over tcp): refused with TP_ERR_PROTOCOL.
# TCP sends cut short at 1060 bytes with 1000-byte parts (short-sends): the values still arrive whole.
set -u
TPRUN=${TPRUN:-./tprun}
PROG=./tests/coll_fault
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Over shm (the default on one host), then over tcp at 2 and 3 ranks: tcp routes small and large transfers on two
# connections per pair, and a desync must still be seen in the order the calls were made.
for tr in shm tcp; do
    sizes="2 3 4 5"
    [ "$tr" = tcp ] && sizes="2 3"
    for mode in desync-coll desync-count desync-type desync-root desync-large desync-barrier; do
        for n in $sizes; do
            out=$(TP_TRANSPORTS=$tr TP_ERRORS=return timeout 30 "$TPRUN" -n $n $PROG $mode 2>&1)
            got=$(echo "$out" | grep -c "^rank [0-9]*: $mode: ranks called different collectives: tp_[a-z_]*: peer rank [0-9]* (.*) failed: ranks called different collectives: desync with rank")
            if [ "$got" -eq "$n" ]; then echo "ok: $tr: $mode at $n ranks: every rank failed with a desync"
            else fail "$tr: $mode at $n ranks: $got of $n ranks reported the desync"; echo "$out" | tail -12; fi
        done
    done
done
# The hierarchical algorithms (TP_COLL_HIER=on; TP_HOST names pretend hosts) on 2 hosts x 2 ranks, consecutive and
# interleaved, and 4 x 2: each rank's first frames must reach a rank that checks them, never wait behind a forwarded
# block that a rank in another collective will not send (desync-coll at 2 x 2 hung there in coll_hier_gather).
for lay in "4 r/2" "4 r%2" "8 r/2"; do
    set -- $lay
    for mode in desync-coll desync-count desync-type desync-root desync-large desync-barrier; do
        out=$(TP_COLL_HIER=on TP_ERRORS=return timeout 30 "$TPRUN" -n $1 sh -c "r=\$TP_RANK; TP_HOST=h\$(($2)) exec $PROG $mode" 2>&1)
        got=$(echo "$out" | grep -c "^rank [0-9]*: $mode: ranks called different collectives: tp_[a-z_]*: peer rank [0-9]* (.*) failed: ranks called different collectives: desync with rank")
        if [ "$got" -eq "$1" ]; then echo "ok: $mode at $1 ranks, hierarchical, host h\$(($2)): every rank failed with a desync"
        else fail "$mode at $1 ranks, hierarchical, host h\$(($2)): $got of $1 ranks reported the desync"; echo "$out" | tail -12; fi
    done
done
for n in 2 4; do # fatal, the default: no call returns; the rank whose desync rank 0 took exits 71, the others 70
    out=$(timeout 30 "$TPRUN" -n $n $PROG desync-coll 2>&1)
    st=$?
    got=$(echo "$out" | grep -c "fate: error: peer rank [0-9]* (.*) failed: ranks called different collectives: desync with rank .*exiting with status 70")
    causes=$(echo "$out" | sed -n 's/.*fate: error: peer rank \([0-9]*\) .*/\1/p' | sort -u)
    own=$(echo "$out" | sed -n 's/^tp rank \([0-9]*\) .*fate: error: this rank failed: ranks called different collectives: desync with rank .*exiting with status 71$/\1/p')
    if [ "$st" = 71 ] && [ "$got" = $((n - 1)) ] && [ "$causes" = "$own" ] && echo "$out" | grep -q "^tprun: rank $own .*status 71" &&
        ! echo "$out" | grep -q "^rank [0-9]*: desync-coll:"; then
        echo "ok: desync-coll at $n ranks, fatal: rank $own exits 71, every other 70 naming it, tprun too, no call returns"
    else fail "desync-coll at $n ranks, fatal: status $st, $got fate lines, causes '$causes', own '$own'"; echo "$out" | tail -12; fi
done
for tr in shm tcp; do # a peer killed mid-call and forged frames, over each transport
    out=$(TP_TRANSPORTS=$tr TP_HEARTBEAT_TIMEOUT=10 timeout 30 "$TPRUN" -n 3 $PROG kill 2>&1)
    killed=$(echo "$out" | sed -n 's/^rank 2: killing itself at \([0-9.]*\) ms/\1/p')
    # a survivor's call fails naming rank 2, or the fate path (whichever notices first) ends it, long before a
    # heartbeat could have missed: the death itself was seen
    for r in 0 1; do
        call=$(echo "$out" | sed -n "s/^rank $r: call [0-9]* failed at \([0-9.]*\) ms: a peer failed: rank 2 failed.*/\1/p")
        fate=$(echo "$out" | sed -n "s/^fate: rank $r learned that rank 2 failed at \([0-9.]*\) ms.*/\1/p")
        at=${call:-$fate}
        how=${call:+its call failed with TP_ERR_PEER_FAILED}
        how=${how:-the fate path ended it}
        if [ -z "$at" ] || [ -z "$killed" ]; then
            fail "$tr: kill: rank $r neither failed its call nor heard of rank 2's death"; echo "$out" | tail -12
        elif awk -v a="$at" -v k="$killed" 'BEGIN { exit !(a - k < 1000) }'; then
            echo "ok: $tr: kill: rank $r: $how $(awk -v a="$at" -v k="$killed" 'BEGIN { printf "%.1f", a - k }') ms after rank 2 died"
        else fail "$tr: kill: rank $r took $(awk -v a="$at" -v k="$killed" 'BEGIN { print a - k }') ms"; fi
    done
    echo "$out" | grep -q "exiting with status 70" && echo "ok: $tr: kill: the fate path ends the survivors with status 70" \
        || fail "$tr: kill: survivors were not ended with status 70"
    for mode in garbage oversize; do
        # oversize rewrites a header in sendmsg: a socket transport's path
        [ "$mode" = oversize ] && [ "$tr" != tcp ] && continue
        out=$(TP_TRANSPORTS=$tr TP_ERRORS=return timeout 30 "$TPRUN" -n 2 $PROG $mode 2>&1)
        if echo "$out" | grep -q "^rank 0: $mode: protocol violation by a peer: tp_barrier: peer rank 1 (.*) failed: it broke the collective protocol: rank 1 sent a frame"; then
            echo "ok: $tr: $mode: refused"
        else fail "$tr: $mode: not refused as a protocol violation"; echo "$out" | tail -8; fi
    done
done
# A call's lazy dial to a stopped rank (the kernel completes the TCP connect; nobody answers the handshake) ends when
# fate names the rank (TP_HEARTBEAT_TIMEOUT, 1 s), not at TP_BOOT_TIMEOUT (20 s here).
out=$(TP_TRANSPORTS=tcp TP_ERRORS=return TP_BOOT_TIMEOUT=20 timeout 60 "$TPRUN" -n 3 $PROG stopped-peer 2>&1)
took=$(echo "$out" | sed -n 's/^rank 2: stopped-peer: a peer failed after \([0-9]*\) ms: tp_exchange: peer rank 1 .*sent nothing for 1 s.*/\1/p')
if [ -n "$took" ] && [ "$took" -lt 5000 ]; then
    echo "ok: stopped-peer: the dial to a stopped rank gave up with fate's verdict after $took ms"
else fail "stopped-peer: the call did not fail by fate's verdict within 5 s (took '${took:-?}' ms)"; echo "$out" | tail -8; fi
# TCP sends cut at 1060 bytes while a transfer's 1000-byte parts (1040 with their headers) go several to a call:
# a send that ends inside a batched frame's header or payload goes on from there, and every value arrives
for n in 2 3; do
    out=$(TP_TRANSPORTS=tcp TP_PART_BYTES=1000 TP_ERRORS=return timeout 60 "$TPRUN" -n $n $PROG short-sends 2>&1)
    if [ "$(echo "$out" | grep -c '^rank [0-9]*: short-sends: success$')" = "$n" ]; then
        echo "ok: tcp: short-sends at $n ranks: all_gather and all_reduce right in 20 rounds"
    else fail "tcp: short-sends at $n ranks"; echo "$out" | tail -8; fi
done
out=$(timeout 30 "$TPRUN" -n 2 $PROG stream 2>&1)
# each call's refusal names that call (its own error, not an earlier call's)
got=0
for call in tp_broadcast tp_all_gather tp_all_gatherv tp_all_reduce tp_reduce_scatter tp_all_to_all tp_send tp_recv \
    tp_exchange; do
    got=$((got + $(echo "$out" | grep -c "^rank [01]: $call: invalid argument: $call: stream 0x[0-9a-f]* is not a live stream")))
done
if [ "$got" = 18 ] && [ "$(echo "$out" | grep -c '^rank [01]: stream then NULL: success$')" = 2 ]; then
    echo "ok: stream: all 9 calls refuse a made-up stream on both ranks, and the comm still works"
else fail "stream: $got of 18 refusals"; echo "$out" | tail -8; fi
[ "$fails" -eq 0 ]
