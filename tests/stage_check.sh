#!/bin/bash
# The staging provider over host streams: every stream call against the host engine at 1-4 ranks, whole and in
# parts; calls on a held stream; capture refusal; a stream that is not one; device copies that fail or never finish;
# a peer's death while a stream waits on a done word (fatal, and TP_ERRORS=return).
set -u
TPRUN=${TPRUN:-./tprun}
PROG=./tests/stage_check
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { # expected status, then tprun's arguments
    local want=$1
    shift
    out=$(timeout 120 "$TPRUN" -n "$@" 2>&1)
    st=$?
    if [ "$st" = "$want" ] && ! echo "$out" | grep -q ": FAIL "; then echo "ok: -n $* (status $st)"; return 0; fi
    fail "-n $*: status $st, want $want"
    echo "$out" | tail -20
    return 1
}
export TP_PART_BYTES=4K
for n in 1 2 3 4; do run 0 $n $PROG all; done
for pb in 64 71; do TP_PART_BYTES=$pb run 0 2 $PROG all; TP_PART_BYTES=$pb run 0 3 $PROG all; done
for n in 2 3; do run 0 $n $PROG later && echo "$out" | grep -c "nothing moved" | grep -qx $n || fail "later at $n"; done
TP_PART_BYTES=64 run 0 2 $PROG later
run 0 2 $PROG capture
run 0 2 $PROG bad
TP_PART_BYTES=4K run 0 2 $PROG pinned
TP_STAGE_TIMEOUT=0.3 run 0 2 $PROG destroy && echo "$out" | grep -q "stage: error: comm [0-9]* ends with 2 stream calls that its streams did not reach within TP_STAGE_TIMEOUT (0.3 s): cancelled" \
    || fail "destroy: the cancel was not named"
# one rank: the failure shows at the next call; the stream went on
run 0 1 $PROG fail
TP_STAGE_TIMEOUT=0.3 run 0 1 $PROG hang
# a failed session does not leak into the next: after tp_finalize, tp_init again (a singleton: tprun's bootstrap
# is used once) and stream calls work
if out=$(timeout 60 $PROG reinit 2>&1) && echo "$out" | grep -q "reinit: 1 ranks.*all match"; then echo "ok: reinit"
else fail "reinit"; echo "$out" | tail; fi
# a copy that never lands: the call fails, the slab is not freed (the copy may still land), the rank exits
TP_STAGE_TIMEOUT=0.3 run 0 1 $PROG hang-keep && echo "$out" | grep -q "its slab and stream are left allocated" \
    || fail "hang-keep: the stuck slab was not kept"
# two ranks: the failing rank's peers would wait for it forever, so fate ends the job naming it; the failing rank
# exits 71 (its own failure), its peer 70, and tprun names the failing rank
for mode in fail hang; do
    TP_STAGE_TIMEOUT=0.3 run 71 2 $PROG $mode || continue
    why="tp_all_reduce: .*(copy in of part 1 of 1 failed on device faulty|copy in on device faulty did not finish within TP_STAGE_TIMEOUT)"
    v=$(echo "$out" | sed -n 's/^tp rank \([01]\) .*fate: error: this rank failed: .*/\1/p')
    echo "$out" | grep -Eq "^tp rank [01] .*fate: error: this rank failed: $why.*status 71$" &&
        echo "$out" | grep -Eq "^tp rank $((1 - ${v:-0})) .*fate: error: peer rank $v .*failed: $why.*status 70$" &&
        echo "$out" | grep -q "^tprun: rank $v .*exited with status 71 (TP_EXIT_FAILED" \
        && echo "ok: $mode at 2 ranks: fate names the failed copy, tprun rank $v" || { fail "$mode at 2 ranks: cause not named"; echo "$out" | tail; }
done
run 137 2 --grace 20 $PROG abort && { echo "$out" | grep -q "^rank 1: fate: rank 0 failed; the waiting stream drained" \
    && echo "ok: abort: the stream waiting on a done word drained" || { fail "abort: no drain"; echo "$out" | tail; }; }
# TP_ERRORS=return: the stream drains, the next call returns the failure naming rank 0, tp_finalize ends
TP_ERRORS=return run 137 2 --grace 20 $PROG abort && {
    echo "$out" | grep -q "^rank 1: abort: the next call: a peer failed: tp_all_reduce: peer rank 0 " \
        && echo "ok: abort (TP_ERRORS=return): the stream drained, the next call names rank 0" \
        || { fail "abort (TP_ERRORS=return)"; echo "$out" | tail; }; }
[ "$fails" -eq 0 ]
