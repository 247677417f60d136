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
# Ranks bound two or more to a CPU, as a launcher other than tprun may bind them (TP_BIND_CPUS unset: each rank
# records the CPU it has): the barrier, small all_reduce and small all_gather go round a ring that spreads them, with
# the same bits.
first_two_cpus() { # the first two CPUs this process may run on, from a list like "0-3,8"
    local list c a b out=()
    list=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
    for c in ${list//,/ }; do
        a=${c%-*} b=${c#*-}
        while [ "$a" -le "$b" ] && [ ${#out[@]} -lt 2 ]; do out+=("$a") a=$((a + 1)); done
    done
    echo "${out[@]}"
}
read -r c0 c1 <<<"$(first_two_cpus)"
if [ -n "${c1:-}" ]; then
    for n in 3 4 8; do
        # block placement: the first half of the ranks on one CPU, the rest on the other
        if out=$(TP_LOG_LEVEL=debug TP_BIND_TO=none timeout 120 "$TPRUN" -n "$n" sh -c \
            "unset TP_BIND_CPUS; exec taskset -c \$([ \$((TP_LOCAL_RANK * 2 / $n)) -eq 0 ] && echo $c0 || echo $c1) ./tests/coll_check" 2>&1) &&
            echo "$out" | grep -q "coll_check: $n ranks.*all match" &&
            [ "$(echo "$out" | grep -c 'go round the ring')" -eq "$n" ]; then
            echo "ok: -n $n bound two or more to a CPU: $(echo "$out" | grep -m1 -o 'go round the ring.*')"
        else
            echo "FAIL: -n $n bound two or more to a CPU (CPUs $c0 and $c1)"
            echo "$out" | grep -v 'cannot reduce' | tail -20
            fails=$((fails + 1))
        fi
    done
else
    echo "note: fewer than 2 CPUs allowed: the shared-CPU ring is not checked"
fi
[ "$fails" -eq 0 ]
