#!/bin/bash
# The NCCL provider's logic without a GPU: tests/nccl/nccl_rank against the fake libnccl.so.2 (tests/nccl/fake_nccl.c):
# results equal the host engine's bit for bit at 1-4 ranks, exact mode by default at 3+, the id through libtp,
# polling of nonblocking communicators, NCCL_NVLS_ENABLE, declines, refusals, async errors and fate's aborts.
. "$(dirname "$0")/../runtime_lib.sh"
RANK=./tests/nccl/nccl_rank
FAKE=$PWD/tests/nccl/.libs/libfakenccl.so
[ -f "$FAKE" ] || { echo "SKIP: $FAKE not built"; exit 77; }
export TP_NCCL_LIBRARY=$FAKE FAKE_NCCL_LOG=$TEST_DIR/log FAKE_NCCL_DIR=$TEST_DIR
unset NCCL_NVLS_ENABLE
fresh() { rm -f "$TEST_DIR"/log.*; }
ops() { cat "$TEST_DIR"/log.* 2>/dev/null; }

for n in 1 2 3 4; do
    step "check at $n ranks"
    fresh
    out=$(timeout 120 "$TPRUN" -n $n $RANK check 2>&1)
    if [ $? -eq 0 ] && [ "$(echo "$out" | grep -c ' 0 failures')" -eq $n ]; then
        pass "$n ranks: every call equals the host engine's: $(echo "$out" | grep 'check 0:')"
    else
        fail "$n ranks: check"; echo "$out" | tail -20
    fi
    # point-to-point before any collective: two-rank communicators; the comm's own one after
    if [ $n -ge 2 ] && ops | grep -q '^n=2 init' && ops | grep -q "^n=$n init"; then pass "$n ranks: pair communicators, then the comm's"
    elif [ $n -ge 2 ]; then fail "$n ranks: expected pair communicators then one of $n ranks"; fi
    if ops | grep -q 'refused'; then fail "$n ranks: a call reached NCCL while its communicator was in progress"; ops | grep refused | head -3; fi
    if [ $n -ge 3 ]; then
        if ops | grep -q "^n=$n allreduce.*dtype=7 op=0"; then fail "$n ranks: an f32 sum went to ncclAllReduce (NCCL's order)"
        else pass "$n ranks: f32 sums never reach ncclAllReduce"; fi
    elif ops | grep -q "^n=2 allreduce.*dtype=7 op=0"; then pass "2 ranks: f32 sums are NCCL's"
    elif [ $n -eq 2 ]; then fail "2 ranks: f32 sums should go to ncclAllReduce"; fi
done

step "order: exact by default, NCCL's order by opt-in"
out=$(timeout 60 "$TPRUN" -n 3 $RANK order 2>&1)
[ "$(echo "$out" | grep -c 'order sum 0 ')" -eq 3 ] && pass "exact: 1 + 1e8 - 1e8 = 0 on every rank" || { fail "exact order"; echo "$out"; }
out=$(TP_NCCL_ORDER=nccl timeout 60 "$TPRUN" -n 3 $RANK order 2>&1)
[ "$(echo "$out" | grep -c 'order sum 1 ')" -eq 3 ] && pass "TP_NCCL_ORDER=nccl: the library's order (1)" || { fail "nccl order"; echo "$out"; }
out=$(TP_NCCL_ORDER=ring timeout 60 "$TPRUN" -n 1 $RANK order 2>&1)
echo "$out" | grep -q 'TP_NCCL_ORDER: expected exact or nccl, got "ring"' && pass "a bad TP_NCCL_ORDER is refused by name" || { fail "bad order"; echo "$out"; }

step "environment NCCL sees"
fresh
timeout 60 "$TPRUN" -n 2 $RANK one >/dev/null 2>&1
[ "$(ops | grep -c 'nvls=0')" -ge 2 ] && pass "NCCL_NVLS_ENABLE=0 before NCCL opens" || { fail "NVLS"; ops | head; }
fresh
NCCL_NVLS_ENABLE=1 timeout 60 "$TPRUN" -n 2 $RANK one >/dev/null 2>&1
[ "$(ops | grep -c 'nvls=1')" -ge 2 ] && pass "a user's NCCL_NVLS_ENABLE is left alone" || { fail "NVLS user"; ops | head; }

step "declines and refusals"
out=$(TP_NCCL_LIBRARY=/nonexistent/libnccl.so.2 TP_LOG_LEVEL=info timeout 60 "$TPRUN" -n 2 $RANK one 2>&1)
if echo "$out" | grep -q 'cannot load /nonexistent/libnccl.so.2' && echo "$out" | grep -q 'collective providers nccl, staged cannot take cuda memory here, and no other does' &&
    [ "$(echo "$out" | grep -c 'one: not supported')" -eq 2 ]; then pass "no NCCL: the call is refused by name on every rank"
else fail "no NCCL"; echo "$out"; fi
cat >"$TEST_DIR/half.sh" <<EOS
#!/bin/bash
[ "\$TP_RANK" = 1 ] && export TP_NCCL_LIBRARY=/nonexistent/libnccl.so.2
exec "\$@"
EOS
chmod +x "$TEST_DIR/half.sh"
out=$(timeout 60 "$TPRUN" -n 3 "$TEST_DIR/half.sh" $RANK one 2>&1)
[ "$(echo "$out" | grep -c 'one: not supported')" -eq 3 ] && pass "NCCL on 2 of 3 ranks: all 3 decline together (no hang)" || { fail "partial NCCL"; echo "$out"; }
for m in one pair; do
    fresh
    out=$(FAKE_GPU_BUS=0000:3b:00.0 timeout 60 "$TPRUN" -n 2 $RANK $m 2>&1)
    [ "$(echo "$out" | grep -c "not using NCCL for CUDA buffers .*: ranks 0 and 1 share GPU 0000:3b:00.0 on one host (NCCL needs a GPU per rank)")" -eq 2 ] &&
        [ "$(echo "$out" | grep -c "$m: not supported (tp_.*: collective providers nccl, staged cannot take")" -eq 2 ] &&
        ! ops | grep -q init &&
        pass "$m: two ranks on one GPU: NCCL declines by name on both, never inits" || { fail "$m: shared GPU"; echo "$out"; }
done
fresh
out=$(FAKE_GPU_BUS=0000:3b:00.0 timeout 60 "$TPRUN" -n 2 $RANK onepair 2>&1)
[ "$(echo "$out" | grep -c "not using NCCL for CUDA buffers on comm of 2 ranks: ranks 0 and 1 share GPU")" -eq 2 ] &&
    ! echo "$out" | grep -q "not using NCCL for CUDA buffers with rank" &&
    [ "$(echo "$out" | grep -c "onepair: not supported (tp_.*: collective providers nccl, staged cannot take")" -eq 2 ] &&
    pass "a pair on a comm that declined: decided from the comm's hellos, no second exchange" || { fail "onepair"; echo "$out"; }
cat >"$TEST_DIR/bus.sh" <<EOS
#!/bin/bash
export FAKE_GPU_BUS=0000:3\$TP_RANK:00.0
exec "\$@"
EOS
chmod +x "$TEST_DIR/bus.sh"
out=$(timeout 60 "$TPRUN" -n 2 "$TEST_DIR/bus.sh" $RANK one 2>&1)
[ "$(echo "$out" | grep -c 'one: success')" -eq 2 ] && ! echo "$out" | grep -q 'share GPU' && pass "two ranks on two GPUs: NCCL takes the call" || { fail "two GPUs"; echo "$out"; }
out=$(FAKE_NCCL_VERSION=21800 TP_LOG_LEVEL=info timeout 60 "$TPRUN" -n 1 $RANK one 2>&1)
echo "$out" | grep -q 'is NCCL 21800: NCCL 2.19 or later is needed' && pass "an old NCCL is not used, by name" || { fail "old NCCL"; echo "$out"; }
out=$(timeout 60 "$TPRUN" -n 2 $RANK nostream 2>&1)
[ "$(echo "$out" | grep -c "nostream: not supported (tp_all_reduce: the buffers are cuda device memory (device fakecuda) and stream is NULL")" -eq 2 ] && pass "CUDA buffers with a NULL stream are refused by name" || { fail "NULL stream"; echo "$out"; }

step "bounded init, async errors"
out=$(FAKE_NCCL_INIT_HANG=1 TP_BOOT_TIMEOUT=1 timeout 60 "$TPRUN" -n 2 $RANK one 2>&1)
[ "$(echo "$out" | grep -c "failed: tp_all_reduce failed (tp_all_reduce: NCCL's communicator init (2 ranks) did not finish within 1 s (TP_BOOT_TIMEOUT))")" -eq 2 ] &&
    pass "a hung init ends at TP_BOOT_TIMEOUT, by name, fatal to the job" || { fail "init hang"; echo "$out"; }
out=$(FAKE_NCCL_FAIL_RANK=1 FAKE_NCCL_FAIL_AFTER=5 timeout 60 "$TPRUN" -n 2 $RANK one 50 2>&1)
echo "$out" | grep -q 'tp_all_reduce failed (tp_all_reduce: NCCL: fake remote error (injected))' &&
    echo "$out" | grep -q '^tprun: rank 1 .* exited with status 71 (TP_EXIT_FAILED' && echo "$out" | grep -q 'exit status 71' &&
    pass "an async error ends the job, by name, tprun naming rank 1 (71)" || { fail "async error"; echo "$out"; }
out=$(TP_ERRORS=return FAKE_NCCL_FAIL_RANK=0 FAKE_NCCL_FAIL_AFTER=5 timeout 60 "$TPRUN" -n 1 $RANK one 50 2>&1)
echo "$out" | grep -q 'one: a peer failed (tp_all_reduce: NCCL: fake remote error (injected))' &&
    pass "TP_ERRORS=return: the call returns the async error" || { fail "async error, return"; echo "$out"; }

step "a peer killed during an all-reduce loop: fate aborts the survivors' communicators"
# No launcher (torchrun-style ranks): tprun would end the survivors itself; here only fate can.
fresh
torch_job 3 "$(free_port)" "$TEST_DIR/loop" $RANK loop
if wait_ready 3 "$TEST_DIR/loop"; then
    vpid=${JOB_PIDS[1]}
    disown "$vpid"
    t0=$(date +%s%N)
    kill -9 "$vpid"
    for r in 0 2; do
        wait_status "${JOB_PIDS[$r]}"
        ms=$((($(date +%s%N) - t0) / 1000000))
        if [ "$ST" = 70 ] && grep -q 'abort' "$TEST_DIR/log.$r" && grep -q 'peer rank 1 .* failed' "$TEST_DIR/loop.$r.err"; then
            pass "rank $r: its NCCL communicator aborted, exit 70, $ms ms after the kill"
        else
            fail "rank $r: status $ST: $(tail -3 "$TEST_DIR/loop.$r.err"; tail -3 "$TEST_DIR/log.$r")"
        fi
    done
else
    fail "loop ranks never got ready: $(cat "$TEST_DIR"/loop.*.err)"
fi
finish
