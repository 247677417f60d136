#!/bin/bash
# Two ranks over shm, the owner reducing from the ring (tests/shm_lend.c): elements split at the ring's wrap still
# give the rank-order sum bit for bit, with the default part size and a small one (more frames, more spans).
set -u
TPRUN=${TPRUN:-./tprun}
fails=0
for part in 4M 64K; do
    out=$(TP_TRANSPORTS=shm TP_PART_BYTES=$part timeout 120 "$TPRUN" -n 2 ./tests/shm_lend 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q "^shm_lend: all match$"; then
        echo "ok: part $part: every sum matches"
    else
        echo "FAIL: part $part:"
        echo "$out" | tail -5
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
