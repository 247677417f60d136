#!/bin/bash
# boot_repeat.sh N RUNS BUILD [BASE]: RUNS boot-only jobs (tprun -n N tests/bench/bench_rank boot: tp_init, one ready
# line, tp_finalize) of the build in directory BUILD and, given BASE, of that build too, alternating run by run so
# both see the same load. Prints each run's status and wall time, the first error line of a failed one, then per
# build the failures and the median, min and max wall time in ms; `uptime` before and after.
set -u
[ $# -ge 3 ] || { echo "usage: $0 N RUNS BUILD [BASE]" >&2; exit 2; }
n=$1 runs=$2
builds=("$3")
[ $# -ge 4 ] && builds+=("$4")
log=$(mktemp "${TMPDIR:-/tmp}/boot_repeat.XXXXXX")
trap 'rm -f "$log" "$log".*' EXIT
echo "before: $(uptime)"
for ((i = 1; i <= runs; i++)); do
    for b in "${builds[@]}"; do
        start=$(date +%s%N)
        "$b/tprun" -n "$n" "$b/tests/bench/bench_rank" boot >/dev/null 2>"$log.err"
        rc=$?
        ms=$((($(date +%s%N) - start) / 1000000))
        echo "$b $rc $ms" >>"$log"
        why=
        [ "$rc" != 0 ] && why=": $(grep -m1 'error' "$log.err")"
        echo "run $i $b: rc=$rc ${ms} ms$why"
    done
done
echo "after: $(uptime)"
for b in "${builds[@]}"; do
    f=$(awk -v b="$b" '$1 == b && $2 != 0' "$log" | wc -l)
    mapfile -t t < <(awk -v b="$b" '$1 == b { print $3 }' "$log" | sort -n)
    k=${#t[@]}
    if ((k % 2)); then m=${t[k / 2]}; else m=$(((t[k / 2 - 1] + t[k / 2]) / 2)); fi
    echo "$b N=$n: $f of $k failed, median $m ms (${t[0]}-${t[k - 1]})"
done
