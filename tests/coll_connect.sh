#!/bin/bash
# Connections on demand (TP_CONNECT). A tcp listener that drops a dial after the handshake (as one drops a handshake
# it held past its deadline under a burst): the dialer dials again; dropped every time, it fails by its timeout,
# saying so in the calling thread. Ranks 0 and 1 of 4 exchange: lazily only they connect, to each other, over shm
# and tcp; eagerly every rank connects to every peer. A rank that ends before any call: the others' first call
# (which would connect to it) names it, long before a heartbeat could miss. A bad TP_CONNECT is refused by name.
. "$(dirname "$0")/runtime_lib.sh"
PROG=./tests/coll_fault
INTR=./tests/coll_intruder

out=$(timeout 30 "$INTR" dropped once 2>&1) && echo "$out" | grep -q "dropped: 3 handshakes for 2 connections" &&
    pass "dropped once: the dialer dialed again and connected" || fail "dropped once: $out"
out=$(timeout 30 "$INTR" dropped always 2>&1) && echo "$out" | grep -q "dropped always: bootstrap failed after [0-9.]* s, \
0 directions connected: rank 0 (tcp [0-9.:]*) .* by the 2 s deadline (TP_BOOT_TIMEOUT) (after [0-9]* connections \
closed in or after the handshake)" &&
    pass "dropped always: the dialer failed by its timeout, naming what happened" || fail "dropped always: $out"

# connected NAME OUT RANK COUNT: RANK logged COUNT connections in OUT (debug lines of tcp and shm).
connected() {
    local got
    got=$(echo "$2" | grep -c "^tp rank $3 ([^)]*) \(tcp\|shm\): rank [0-9]*: connected")
    [ "$got" = "$4" ] && pass "$1: rank $3 made $4 connections" || fail "$1: rank $3 made $got connections, not $4"
}
for tr in shm tcp; do
    per=1
    [ $tr = tcp ] && per=2 # one connection per direction
    out=$(TP_TRANSPORTS=$tr TP_LOG_LEVEL=debug timeout 30 ./tprun -n 4 $PROG pair 2>&1)
    [ $? = 0 ] || fail "$tr: pair: $(echo "$out" | tail -5)"
    for r in 0 1; do connected "$tr lazy pair" "$out" $r $per; done
    for r in 2 3; do connected "$tr lazy pair" "$out" $r 0; done
    out=$(TP_CONNECT=eager TP_TRANSPORTS=$tr TP_LOG_LEVEL=debug timeout 30 ./tprun -n 4 $PROG pair 2>&1)
    [ $? = 0 ] || fail "$tr: eager pair: $(echo "$out" | tail -5)"
    for r in 0 1 2 3; do connected "$tr eager pair" "$out" $r $((3 * per)); done
    start=$SECONDS
    out=$(TP_TRANSPORTS=$tr TP_ERRORS=return TP_HEARTBEAT_TIMEOUT=10 timeout 30 ./tprun -n 3 $PROG dead-peer 2>&1)
    took=$((SECONDS - start))
    # fate's closed connection or shm's pidfd at the first post may learn of it first: either names rank 1's end
    got=$(echo "$out" | grep -cE "^rank [02]: dead-peer: a peer failed: .*rank 1 \(.*\) failed: (it ended without tp_finalize|its process \(pid [0-9]+\) exited before shared memory was connected)")
    [ "$got" = 2 ] && [ "$took" -lt 8 ] && pass "$tr: dead peer: both survivors' first call named rank 1 in ${took} s" ||
        fail "$tr: dead peer: $got of 2 survivors named rank 1 in ${took} s: $(echo "$out" | tail -6)"
done
out=$(TP_CONNECT=sometimes timeout 30 ./tprun -n 2 $PROG clean 2>&1)
[ $? != 0 ] && echo "$out" | grep -q 'TP_CONNECT: expected lazy or eager, got "sometimes"' &&
    pass "TP_CONNECT=sometimes refused by name" || fail "TP_CONNECT=sometimes: $out"
finish
