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

# Each step's PMIx client directory is this Slurm's own: in /tmp (the default) a job of the same number in another
# private Slurm (they all count from 1), or one killed earlier, failed the step before it launched.
step "the steps' PMIx client directory is private to this Slurm"
out=$(srun_n 1 sh -c 'ls -d "$1"/pmix-cli/spmix_appdir_*' sh "$SLURM_DIR" 2>&1)
st=$?
[ $st -eq 0 ] && [ -n "$out" ] && pass "srun --mpi=pmix: the step's client directory is under $SLURM_DIR" ||
    fail "the step's PMIx client directory: status $st: $out"

step "coll_check under srun -n 4"
out=$(TP_PART_BYTES=64K srun_n 4 ./tests/coll_check 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q 'coll_check: 4 ranks.*all match' && pass "coll_check under srun -n 4" ||
    fail "coll_check under srun: $(echo "$out" | grep -v 'cannot reduce' | tail -20)"

step "fate under srun"
out=$(srun_n 3 "$RANK_PROG" die 1 9 2>&1)
st=$?
[ $st -ne 0 ] && echo "$out" | grep -q 'callback: rank [02] saw peer 1 (.*) fail' && pass "fate under srun" ||
    fail "fate under srun: status $st: $out"

# tprun inside an allocation: srun starts tprun's agent on each node (a Slurm step), the agent the ranks, which
# bootstrap from tprun's own variables as on every host (PMIx with --pmix, below); --tag-output is tprun's.
step "tprun inside an allocation"
out=$(timeout -k 5 60 salloc -Q -n 2 --overcommit "$TPRUN" -n 3 --tag-output "$RANK_PROG" boot 2>&1)
st=$?
ok=1
for r in 0 1 2; do echo "$out" | grep -q "^\[$r\] ready rank $r of 3 .* job $(hostname)-[0-9]*-[0-9a-f]*$" || ok=0; done
[ $st -eq 0 ] && [ $ok = 1 ] && pass "tprun in an allocation launches through srun" ||
    fail "tprun in an allocation: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 2 sh -c 'echo "$SLURM_JOB_ID.$SLURM_STEP_ID $SLURM_PROCID/$SLURM_NTASKS $SLURM_LOCALID"' 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep -cE '^[0-9]+\.[0-9]+ ')" = 2 ] && [ "$(echo "$out" | cut -d' ' -f1 | sort -u | wc -l)" = 1 ] &&
    [ "$(echo "$out" | cut -d' ' -f2- | sort | tr '\n' ' ')" = "0/2 0 1/2 1 " ] &&
    pass "tprun via srun: the ranks run in one Slurm step of the job, each with its own SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID" ||
    fail "tprun via srun, the ranks' Slurm step and task variables: status $st: $out"

# tprun's status is the first failing rank's, as without Slurm (srun's own is the largest of all the tasks').
step "tprun's status is the first failing rank's, as without Slurm (srun's own is the..."
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 "$RANK_PROG" exit 1 7 2>&1)
st=$?
[ $st -eq 7 ] && echo "$out" | grep -q 'callback: rank [02] saw peer 1' &&
    echo "$out" | grep '^tprun:' | head -1 | grep -q "^tprun: rank 1 (host $(hostname -s), pid [0-9]*) exited with status 7$" &&
    pass "tprun via srun: rank 1 exits 7: tprun exits 7 and names it" || fail "tprun via srun, failing rank: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 "$RANK_PROG" die 2 9 2>&1)
st=$?
[ $st -eq 137 ] && echo "$out" | grep '^tprun:' | head -1 | grep -q "^tprun: rank 2 (host $(hostname -s), pid [0-9]*) killed by signal 9 (SIGKILL)$" &&
    pass "tprun via srun: rank 2 SIGKILLed: tprun exits 137 and names it" || fail "tprun via srun, killed rank: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 2 sh -c 'echo out $SLURM_PROCID; echo err $SLURM_PROCID >&2' 2>"$TEST_DIR/err")
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | sort | tr '\n' ' ')" = "out 0 out 1 " ] &&
    [ "$(sort "$TEST_DIR/err" | tr '\n' ' ')" = "err 0 err 1 " ] &&
    pass "tprun via srun: stdout and stderr forwarded, nothing of the agents' channel in them" ||
    fail "tprun via srun, output: status $st: $out / $(cat "$TEST_DIR/err")"

# tprun's placement (-H) and --wdir reach srun: the ranks run on the named node, in the named directory; a name
# that is not a node of the allocation is refused by name before anything starts.
step "tprun's placement (-H) and --wdir reach srun"
node=$(hostname -s)
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 -H "$node:3" --wdir "$TEST_DIR" sh -c 'echo "r$SLURM_PROCID $SLURMD_NODENAME $(pwd)"' 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep -c "^r[0-2] $node $TEST_DIR\$")" = 3 ] &&
    pass "tprun via srun: -H $node:3 and --wdir become srun's placement and --chdir" ||
    fail "tprun via srun, -H and --wdir: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 2 -H nosuchnode:2 true 2>&1)
st=$?
[ $st -eq 2 ] && echo "$out" | grep -qx "tprun: -H/--hostfile: host nosuchnode is not a node of Slurm allocation [0-9]* (its nodes: $node)" &&
    pass "tprun via srun: a host that is not a node fails by name ($st)" ||
    fail "tprun via srun, unknown node: status $st: $out"

# What tprun does on every host it also does under Slurm: rank 0's stdin, --json-summary, the keeper, --pmix.
step "stdin, --json-summary, the keeper and --pmix under Slurm"
out=$(printf 'line one\nline two\n' | timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 2 sh -c 'if [ "$TP_RANK" = 0 ]; then sed "s/^/got: /"; else cat; echo "rank 1 read $(wc -c) bytes"; fi' 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep '^got: ' | tr '\n' ' ')" = "got: line one got: line two " ] &&
    echo "$out" | grep -qx "rank 1 read 0 bytes" && pass "tprun via srun: stdin goes to rank 0 (and only to it)" ||
    fail "tprun via srun, stdin: status $st: $out"
J=$TEST_DIR/summary.json
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" -n 3 --json-summary "$J" "$RANK_PROG" exit 1 7 2>&1)
st=$?
[ $st -eq 7 ] && python3 - "$J" <<'PY' && pass "tprun via srun: --json-summary names rank 1 (status 7, its host and pid)" || fail "tprun via srun, --json-summary: status $st: $out: $(cat "$J" 2>&1)"
import json, socket, sys
s = json.load(open(sys.argv[1]))
r1 = s["ranks"][1]
assert s["exit_status"] == 7 and s["first_failure"] == 1, s
assert r1["status"] == 7 and r1["exit_code"] == 7 and r1["host"] == socket.gethostname().split(".")[0] and r1["pid"] > 0, r1
PY
# SIGKILL to tprun inside the allocation: its keeper ends the srun steps, and no rank is left running.
rm -f "$TEST_DIR"/pid.*
salloc -Q -n 2 "$TPRUN" -n 2 sh -c 'echo $$ >"$0/pid.$TP_RANK.tmp" && mv "$0/pid.$TP_RANK.tmp" "$0/pid.$TP_RANK"; exec sleep 300' "$TEST_DIR" >/dev/null 2>&1 &
sp=$!
for _ in $(seq 1 400); do [ -f "$TEST_DIR/pid.0" ] && [ -f "$TEST_DIR/pid.1" ] && break; sleep 0.05; done
pids="$(cat "$TEST_DIR"/pid.* 2>/dev/null | tr '\n' ' ')"
tp=$(pgrep -P "$sp" -x tprun)
if [ -z "$tp" ] || [ "$(echo $pids | wc -w)" != 2 ]; then
    fail "tprun via srun, keeper: the ranks did not start (tprun ${tp:-not found}, ranks: $pids)"
else
    kill -KILL "$tp"
    left=$pids
    for _ in $(seq 1 200); do
        left=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
        [ -z "$left" ] && break
        sleep 0.05
    done
    [ -z "$left" ] && pass "tprun via srun: tprun SIGKILLed: its keeper leaves no rank running" ||
        fail "tprun via srun, keeper: ranks $left still running 10 s after tprun was SIGKILLed"
    for p in $left; do kill -KILL "$p"; done
fi
wait "$sp" 2>/dev/null
# tprun --pmix under Slurm: each node's agent hosts tprun's PMIx server; a plain PMIx client fences and reads a
# peer's data; a PMIx client rank that fails is named with its status.
CLIENT=$PWD/tests/pmix_client
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" --pmix -n 3 "$CLIENT" info 2>&1)
st=$?
ok=1
for r in 0 1 2; do echo "$out" | grep -q "^rank $r size 3 local $r/3 peers 0,1,2 node 0 host $node nspace tprun\.[^ ]* peer $(((r + 1) % 3)) says ep-of-rank-" || ok=0; done
[ $st -eq 0 ] && [ $ok = 1 ] && pass "tprun --pmix via srun: a plain PMIx client sees its world and a peer's data after a fence" ||
    fail "tprun --pmix via srun: status $st: $out"
out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" --pmix -n 3 "$CLIENT" fences 5 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep -c 'fences over all and 5 over ranks of parity')" = 3 ] &&
    pass "tprun --pmix via srun: 5 fences over all ranks and over each parity subset" || fail "tprun --pmix via srun, fences: status $st: $out"

out=$(timeout -k 5 60 salloc -Q -n 2 env TP_LAUNCHER=local "$TPRUN" -n 2 "$RANK_PROG" boot 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep '^ready' | grep -vc ' job pmix-')" = 2 ] &&
    pass "TP_LAUNCHER=local starts the ranks itself in an allocation" || fail "TP_LAUNCHER=local: status $st: $out"

out=$(timeout -k 5 60 salloc -Q -n 2 "$TPRUN" --launcher local -n 2 "$RANK_PROG" boot 2>&1)
st=$?
[ $st -eq 0 ] && [ "$(echo "$out" | grep '^ready' | grep -vc ' job pmix-')" = 2 ] &&
    pass "--launcher local starts the ranks itself in an allocation" || fail "--launcher local: status $st: $out"
finish
