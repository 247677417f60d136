#!/bin/bash
# The main job: the tensor-parallel MLP in f32 and bf16 at 1 to 4 ranks matches the rank-order reference bit for bit.
set -u
TPRUN=${TPRUN:-./tprun}
fails=0
for dtype in f32 bf16; do
    for n in 1 2 3 4; do
        if out=$(timeout 60 "$TPRUN" -n $n ./examples/tp_mlp --dtype $dtype --batch 4 --model 128 --hidden 301 2>&1) \
            && [ "$(echo "$out" | tail -n 1)" = "tp_mlp: $n ranks, $dtype: 3 iterations, output (512 values) equal bit for bit to the rank-order reference on every rank: PASS" ]; then
            echo "ok: tp_mlp $dtype at $n ranks"
        else
            echo "FAIL: tp_mlp $dtype at $n ranks"; echo "$out" | tail -5; fails=$((fails + 1))
        fi
    done
done
# Bad arguments are refused with status 2 and one line naming the option, before any rank starts.
for args in "--help" "--dtype f16" "--batch" "--batch 0" "--hidden 3x" "--iters -2"; do
    out=$(./examples/tp_mlp $args 2>&1)
    st=$?
    if [ $st = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ] && echo "$out" | grep -q "^tp_mlp: .*${args%% *}"; then
        echo "ok: tp_mlp $args refused"
    else
        echo "FAIL: tp_mlp $args: status $st: $out"; fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
