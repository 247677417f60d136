#!/bin/bash
# Per-pair connection data and reach priorities: a second transport registered beside TCP (tests/transport_pairs.c)
# is chosen for the peers of this rank's parity, and each rank gets exactly its peers' data, at 1 to 8 ranks.
. "$(dirname "$0")/runtime_lib.sh"
PROG=./tests/transport_pairs
export TP_TRANSPORTS=^shm # beside TCP alone: shm would reach every peer on this host ahead of pairtest

for n in 1 2 3 4 5 6 7 8; do
    out=$(timeout 60 "$TPRUN" -n "$n" "$PROG" 2>&1)
    st=$? ok=1
    for r in $(seq 0 $((n - 1))); do
        # the peers with this rank's parity, itself excluded
        peers=0
        for p in $(seq 0 $((n - 1))); do [ $p != $r ] && [ $(((p + r) % 2)) = 0 ] && peers=$((peers + 1)); done
        [ "$(echo "$out" | grep -c "^rank $r: pairtest: chosen for $peers peers, 0 wrong, all-reduce success, 0 wrong sums$")" = 1 ] || ok=0
    done
    [ $st = 0 ] && [ $ok = 1 ] && pass "tprun -n $n: every rank got exactly its peers' data" ||
        fail "tprun -n $n: status $st: $out"
done

out=$(PAIRTEST_MODE=none timeout 60 "$TPRUN" -n 4 "$PROG" 2>&1)
[ $? = 0 ] && [ "$(echo "$out" | grep -c "pairtest: chosen for 0 peers, 0 wrong, all-reduce success, 0 wrong sums$")" = 4 ] &&
    pass "a transport that reaches nobody: all over TCP, the exchange carries nothing" || fail "none: $out"

# Rank 1 reaches every peer over pairtest, ranks 0 and 2 reach it over TCP: named by the first to fail, and the job fails instead of hanging.
out=$(PAIRTEST_MODE=lopsided timeout 60 "$TPRUN" -n 4 "$PROG" 2>&1)
st=$?
[ $st != 0 ] && [ $st != 124 ] &&
    echo "$out" | grep -q "^tp rank [02] ([^)]*) transport: error: rank 1 (host [^)]*) reaches this rank over pairtest, this rank chose tcp for it$" &&
    pass "the ends of a pair disagree: named" || fail "lopsided: status $st: $out"
finish
