#!/bin/bash
# Staging on real CUDA streams (skipped, 77, without a usable GPU): two ranks sharing GPU 0 (--gpus-per-rank 0), device memory and the
# engine's own non-blocking stream; every stream call against the host engine bit for bit, whole and in parts; calls
# queued behind a stream wait on a pinned gate move nothing until it opens; a capturing stream is refused.
set -u
TPRUN=${TPRUN:-./tprun}
PROG=./tests/stage_check
$PROG probe-cuda || exit 77
fails=0
run() {
    out=$(timeout 300 "$TPRUN" --gpus-per-rank 0 -n "$@" 2>&1)
    st=$?
    if [ "$st" = 0 ] && ! echo "$out" | grep -q ": FAIL "; then echo "ok: -n $*"; return; fi
    echo "FAIL: -n $*: status $st"
    echo "$out" | tail -20
    fails=$((fails + 1))
}
for pb in 4K 64K; do TP_PART_BYTES=$pb run 2 $PROG all --cuda; done
TP_PART_BYTES=64K run 2 $PROG later --cuda
TP_PART_BYTES=4K run 2 $PROG later --cuda
run 2 $PROG capture --cuda
[ "$fails" -eq 0 ]
