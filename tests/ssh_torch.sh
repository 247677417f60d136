#!/bin/bash
# torch.distributed's env:// rendezvous across namespace hosts: rank 0's TCPStore binds MASTER_PORT on its own
# host (held there by its agent, or by tprun when rank 0 is on tprun's host) and the others reach it at
# MASTER_ADDR; with libtp in the same process and under --pmix too.
# Four launches over ssh on a loaded machine outlast netns_lib's 120 s; ssh's own deadline is not tested here.
NETNS_TEST_TIMEOUT=${NETNS_TEST_TIMEOUT:-240}
export TP_SSH_TIMEOUT=30
. "$(dirname "$0")/netns_lib.sh"

STORE=$PWD/tests/torch_store_rank
[ -x "$STORE" ] || { echo "missing $STORE (run from the build directory)"; exit 99; }

# store_job WHAT ARGS...: tprun on host a with ARGS must exit 0 with one "ok" line per rank (3 ranks).
store_job() {
    local what=$1 out st
    shift
    out=$(tprun_on_a --timeout 60 "$@" 2>&1)
    st=$?
    [ $st = 0 ] && [ "$(echo "$out" | grep -c "^store rank [0-2] of 3: ok")" = 3 ] && pass "$what" ||
        fail "$what: status $st: $out"
}

store_job "rank 0 on remote host b, across" -n 3 -H b,a,c "$STORE" across
store_job "rank 0 on remote host b: MASTER_PORT held there" -n 3 -H b,a,c "$STORE" reserved
store_job "rank 0 on tprun's host a, others on b and c, across" -n 3 -H a,b,c "$STORE" across
if grep -q '^#define HAVE_PMIX 1' ./config.h 2>/dev/null; then
    export TMPDIR=$D
    store_job "--pmix, rank 0 on remote host b, across" --pmix -x TMPDIR="$D" -n 3 -H b:2,a "$STORE" across
else
    echo "skip: --pmix (tprun built without PMIx)"
fi
wait_no_leftovers 10 || fail "processes left in the test hosts: $(leftovers)"
finish
