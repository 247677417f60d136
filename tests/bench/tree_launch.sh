#!/bin/bash
# tree_launch.sh: launch time across TREE_HOSTS (16) namespace hosts with sshd (root only), flat against trees:
# `tprun -n H -H h0,..,h(H-1) PROG` from h0 for each TP_LAUNCH_FANOUT in FANOUTS ("0 2 4 8"; 0 is flat), RUNS (7)
# interleaved runs each; prints median and min ms. PROG: /bin/true (BOOT=1: tests/runtime_rank boot).
# Run from the build directory: tests/bench/tree_launch.sh
. "$(dirname "$0")/../ssh_tree_lib.sh"
FANOUTS=${FANOUTS:-"0 2 4 8"}
RUNS=${RUNS:-7}
HOSTS=$(seq -s, -f 'h%g' 0 $((TREE_HOSTS - 1)))
PROG=/bin/true
[ "${BOOT:-0}" = 1 ] && PROG="$RANK_PROG boot"
for f in $FANOUTS; do : >"$D/t$f"; done
for r in $(seq 1 "$RUNS"); do
    for f in $FANOUTS; do
        t0=$(date +%s%N)
        TP_LAUNCH_FANOUT=$f ip netns exec "$(ns_of 0)" "$TPRUN" --ssh "$SSH" -n "$TREE_HOSTS" -H "$HOSTS" $PROG \
            >/dev/null 2>"$D/err" || { echo "fan-out $f failed: $(cat "$D/err")"; exit 1; }
        echo $((($(date +%s%N) - t0) / 1000000)) >>"$D/t$f"
    done
done
echo "| hosts | TP_LAUNCH_FANOUT | median ms | min ms | runs |"
echo "|---:|---:|---:|---:|---:|"
for f in $FANOUTS; do
    sort -n "$D/t$f" | awk -v h="$TREE_HOSTS" -v f="$f" '{a[NR]=$1} END {printf "| %d | %s | %d | %d | %d |\n", h, f == 0 ? "0 (flat)" : f, a[int((NR+1)/2)], a[1], NR}'
done
