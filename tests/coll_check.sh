#!/bin/bash
# Every collective x type x size against the rank-order reference, at worlds 1, 2, 3, 4 and 8 (small parts so
# sizes of one, two and three parts stay fast), and slices of several parts at 3 ranks; then the smallest part
# TP_PART_BYTES allows and odd sizes above it (no element type divides 71), where a part is a few elements.
set -u
TPRUN=${TPRUN:-./tprun}
export TP_PART_BYTES=64K
fails=0
run() {
    if out=$(timeout 120 "$TPRUN" -n "$@" 2>&1); then
        echo "ok: -n $*: $(echo "$out" | grep 'coll_check:')"
    else
        echo "FAIL: -n $*"
        echo "$out" | grep -v 'cannot reduce' | tail -20
        fails=$((fails + 1))
    fi
}
for n in 1 2 3 4 8; do run "$n" ./tests/coll_check; done
run 3 ./tests/coll_check --big
for pb in 64 65 71; do
    TP_PART_BYTES=$pb run 2 ./tests/coll_check
    TP_PART_BYTES=$pb run 3 ./tests/coll_check --big
done
TP_PART_BYTES=71 run 4 ./tests/coll_check
[ "$fails" -eq 0 ]
