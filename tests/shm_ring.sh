#!/bin/bash
# Frames of 4 KiB through the shm rings, ping-pong and all_reduce at 2 and 4 ranks (tests/shm_ring.c): exact, and
# each ring keeps only its first pages resident (connections on demand, so a mapping holds only what was touched).
set -u
TPRUN=${TPRUN:-./tprun}
fails=0
for n in 2 4; do
    out=$(TP_TRANSPORTS=shm TP_CONNECT=lazy timeout 120 "$TPRUN" -n $n ./tests/shm_ring 2>&1)
    rc=$?
    if [ $rc -eq 77 ] || echo "$out" | grep -q "huge pages here"; then
        echo "skip: $n ranks: shared memory uses huge pages here"
        exit 77
    elif [ $rc -eq 0 ] && [ "$(echo "$out" | grep -c "^shm_ring: rank [0-9]*: ok$")" -eq $n ]; then
        echo "ok: $n ranks: exact, each ring's first pages only"
    else
        echo "FAIL: $n ranks (status $rc):"
        echo "$out" | tail -6
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
