#!/bin/bash
# libtp under srun --mpi=pmix and tprun inside a Slurm allocation, on a private one-node Slurm started here
# (scripts/slurm-test-setup.sh; skipped with 77 when Slurm cannot be installed or started).
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/pmix_lib.sh"
have_pmix_build || skip "libtp built without PMIx"
SETUP=$(dirname "$0")/../scripts/slurm-test-setup.sh
SLURM_DIR=$TEST_DIR/slurm
chmod 755 "$TEST_DIR" # munged runs as munge and must reach its socket's directory
trap '"$SETUP" stop "$SLURM_DIR"; cleanup' EXIT
step "starting a private one-node Slurm"
setup_out=$("$SETUP" start "$SLURM_DIR" 2>&1)
case $? in
0) export SLURM_CONF=$SLURM_DIR/slurm.conf ;;
77) skip "no Slurm here: $setup_out" ;;
*) echo "FAIL: slurm-test-setup.sh start: $setup_out"; exit 1 ;;
esac
unset SLURM_JOB_ID SLURM_JOBID TP_LAUNCHER
srun_n() { timeout -k 5 60 srun --mpi=pmix --overcommit -n "$@"; }

step "srun --mpi=pmix -n 4: boot"
out=$(srun_n 4 "$RANK_PROG" boot 2>&1)
st=$?
ok=1
for r in 0 1 2 3; do echo "$out" | grep -q "^ready rank $r of 4 pid [0-9]* local $r/4 node 0 job pmix-slurm" || ok=0; done
[ $st -eq 0 ] && [ $ok = 1 ] && pass "srun --mpi=pmix -n 4: rank, size, locality" || fail "srun -n 4: status $st: $out"

step "coll_check under srun -n 4"
out=$(TP_PART_BYTES=64K srun_n 4 ./tests/coll_check 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q 'coll_check: 4 ranks.*all match' && pass "coll_check under srun -n 4" ||
    fail "coll_check under srun: $(echo "$out" | grep -v 'cannot reduce' | tail -20)"

step "fate under srun"
out=$(srun_n 3 "$RANK_PROG" die 1 9 2>&1)
st=$?
[ $st -ne 0 ] && echo "$out" | grep -q 'callback: rank [02] saw peer 1 (.*) fail' && pass "fate under srun" ||
    fail "fate under srun: status $st: $out"

# tprun inside an allocation: the ranks are one srun step and bootstrap through PMIx; output stays labelled.
step "tprun inside an allocation"
out=$(timeout -k 5 60 salloc -Q -n 2 --overcommit "$TPRUN" -n 3 --tag-output "$RANK_PROG" boot 2>&1)
st=$?
ok=1
for r in 0 1 2; do echo "$out" | grep -q "^$r: ready rank $r of 3 .* job pmix-slurm" || ok=0; done
[ $st -eq 0 ] && [ $ok = 1 ] && pass "tprun in an allocation launches through srun" ||
    fail "tprun in an allocation: status $st: $out"

# tprun's status is the first failing rank's, as without Slurm (srun's own is the largest of all the tasks').
step "tprun's status is the first failing rank's, as without Slurm (srun's own is the..."
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 "$RANK_PROG" exit 1 7 2>&1)
st=$?
[ $st -eq 7 ] && echo "$out" | grep -q 'callback: rank [02] saw peer 1' &&
    echo "$out" | grep '^tprun:' | head -1 | grep -q "^tprun: rank 1 (host [^ ]*) exited with status 7$" &&
    pass "tprun via srun: rank 1 exits 7: tprun exits 7 and names it" || fail "tprun via srun, failing rank: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 "$RANK_PROG" die 2 9 2>&1)
st=$?
[ $st -eq 137 ] && echo "$out" | grep '^tprun:' | head -1 | grep -q "^tprun: rank 2 (host [^ ]*) killed by signal 9 (SIGKILL)$" &&
    pass "tprun via srun: rank 2 SIGKILLed: tprun exits 137 and names it" || fail "tprun via srun, killed rank: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 2 sh -c 'echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2' 2>"$TEST_DIR/err")
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | sort | tr '\n' ' ')" = "out 0 out 1 " ] &&
    [ "$(sort "$TEST_DIR/err" | tr '\n' ' ')" = "err 0 err 1 " ] &&
    pass "tprun via srun: stdout and stderr forwarded, the task reports kept out of them" ||
    fail "tprun via srun, output: status $st: $out / $(cat "$TEST_DIR/err")"

# tprun's placement (-H) and --wdir reach srun: the ranks run on the named node, in the named directory; a name
# that is not a node of the allocation fails the job with srun's message.
step "tprun's placement (-H) and --wdir reach srun"
node=$(hostname -s)
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 -H "$node:3" --wdir "$TEST_DIR" sh -c 'echo "r$SLURM_PROCID $SLURMD_NODENAME $(pwd)"' 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep -c "^r[0-2] $node $TEST_DIR\$")" = 3 ] &&
    pass "tprun via srun: -H $node:3 and --wdir become srun's placement and --chdir" ||
    fail "tprun via srun, -H and --wdir: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 2 -H nosuchnode:2 true 2>&1)
st=$?
[ $st -ne 0 ] && echo "$out" | grep -q "^tprun: srun exited with status 1, but only 0 of 2 ranks reported their end (tprun placed the ranks on nosuchnode from -H/--hostfile: these must be node names of this allocation)$" &&
    pass "tprun via srun: a host that is not a node fails by name ($st)" ||
    fail "tprun via srun, unknown node: status $st: $out"

out=$(timeout -k 5 60 salloc -Q -n 2 env TP_LAUNCHER=local "$TPRUN" -n 2 "$RANK_PROG" boot 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep '^ready' | grep -vc ' job pmix-')" = 2 ] &&
    pass "TP_LAUNCHER=local starts the ranks itself in an allocation" || fail "TP_LAUNCHER=local: status $st: $out"

out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" --launcher local -n 2 "$RANK_PROG" boot 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep '^ready' | grep -vc ' job pmix-')" = 2 ] &&
    pass "--launcher local starts the ranks itself in an allocation" || fail "--launcher local: status $st: $out"
finish
