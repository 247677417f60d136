#!/bin/sh
# torch.distributed's env:// rendezvous under tprun on one host: rank 0 binds MASTER_PORT (SO_REUSEADDR, as
# TCPStore does) and listens, the others connect; without libtp, with tp_init before or after the store, and
# with the store held across a collective and tp_finalize; under --pmix too. MASTER_PORT is not the bootstrap's
# port and is held by tprun (a bind without SO_REUSEADDR fails). -x of a torchrun name with --no-torch-env.
. "$(dirname "$0")/launcher_lib.sh"

STORE="$builddir/tests/torch_store_rank"
[ -x "$STORE" ] || { echo "missing $STORE (run from the build directory)"; exit 99; }

# store_job WHAT ARGS...: tprun ARGS must exit 0 with one "ok" line per rank (3 ranks).
store_job() {
    what=$1
    shift
    "$TPRUN" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    oks=$(grep -c "^store rank [0-2] of 3: ok" "$T/out")
    if [ "$rc" = 0 ] && [ "$oks" = 3 ]; then pass "$what"; else fail "$what: status $rc, $oks ok: $(cat "$T/out" "$T/err")"; fi
}

families=inet
grep -q . /proc/net/if_inet6 2>/dev/null && families="inet inet6"
for fam in $families; do
    for mode in nolibtp init-first store-first across; do
        store_job "tprun -n 3, store on $fam, $mode" -n 3 "$STORE" $mode $fam
    done
done
store_job "tprun -n 3 -H localhost,127.0.0.1:2, across" -n 3 -H localhost,127.0.0.1:2 "$STORE" across
store_job "MASTER_PORT is held by tprun for the job" -n 3 "$STORE" reserved
if grep -q '^#define HAVE_PMIX 1' ./config.h 2>/dev/null; then
    store_job "tprun --pmix -n 3, across" --pmix -n 3 "$STORE" across
    store_job "tprun --pmix -n 3, nolibtp" --pmix -n 3 "$STORE" nolibtp
else
    echo "skip: --pmix (tprun built without PMIx)"
fi

# -x of a torchrun name: accepted with the torch variables off, in either order; refused with them on.
for args in "-x RANK=9 --no-torch-env" "--no-torch-env -x RANK=9"; do
    "$TPRUN" -n 2 $args "$RANKP" '*:env' >"$T/out" 2>"$T/err"
    expect_eq "tprun $args: status" "$?" 0
    expect_eq "tprun $args: rank 1 RANK" "$(sed -n 's/^1 RANK=//p' "$T/out")" 9
done
TP_TORCH_ENV=0 "$TPRUN" -n 1 -x MASTER_PORT=5 "$RANKP" '*:env' >"$T/out" 2>"$T/err"
expect_eq "TP_TORCH_ENV=0 -x MASTER_PORT=5" "$(sed -n 's/^0 MASTER_PORT=//p' "$T/out")" 5
"$TPRUN" -n 2 -x RANK=9 "$RANKP" '*:env' >"$T/out" 2>"$T/err"
expect_eq "-x RANK=9 with the torch variables on: status" "$?" 2
expect_eq "-x RANK=9 with the torch variables on: message" "$(cat "$T/err")" \
    "tprun: -x RANK: tprun sets this variable for each rank; it cannot be overridden (unless --no-torch-env)"
[ -s "$T/out" ] && fail "-x RANK=9 refused, yet a rank ran"
finish
