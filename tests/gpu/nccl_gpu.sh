#!/bin/bash
# The NCCL provider on GPUs (run by hand from the build directory of a GPU machine; 77 without a GPU): every call
# bit for bit against the host engine at world 1 and, with two GPUs, 2 (with one: 2 ranks sharing it, staged); a rank
# SIGKILLed during an all-reduce loop (NCCL with two GPUs, staged with one; no launcher: only libtp's fate ends the
# survivor; median of 10 runs under 100 ms: the survivor gone with two GPUs, its fate callback with one); torch's
# NCCL backend and libtp in one process under tprun; then the benchmark against a raw NCCL loop.
. "$(dirname "$0")/../runtime_lib.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset TP_GPUS_PER_RANK # a GPU each, tprun's default, whatever the caller set
P=./tests/gpu/nccl_gpu
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || { echo "SKIP: no GPU"; exit 77; }
worlds=1
[ "$gpus" -ge 2 ] && worlds="1 2"

for n in $worlds; do
    step "check at $n ranks"
    out=$(timeout 300 "$TPRUN" -n $n $P check 2>&1)
    [ $? -eq 0 ] && [ "$(echo "$out" | grep -c ' 0 failures')" -eq $n ] &&
        pass "$n ranks: $(echo "$out" | grep 'check 0:')" || { fail "$n ranks"; echo "$out" | tail -20; }
done
if [ "$gpus" -eq 1 ]; then
    step "check at 2 ranks sharing the one GPU: NCCL declines by name, staging takes the calls"
    out=$(timeout 600 "$TPRUN" -n 2 --gpus-per-rank 0 $P check 2>&1)
    [ $? -eq 0 ] && [ "$(echo "$out" | grep -c ' 0 failures')" -eq 2 ] && [ "$(echo "$out" | grep -c 'on comm of 2 ranks: ranks 0 and 1 share GPU')" -eq 2 ] &&
        pass "2 ranks, one GPU: $(echo "$out" | grep 'check 0:')" || { fail "2 ranks on one GPU"; echo "$out" | tail -20; }
fi

kind=$([ "$gpus" -ge 2 ] && echo "an NCCL" || echo "a staged (two ranks on one GPU)")
step "a rank SIGKILLed during $kind all-reduce loop, 10 runs"
times=()
learned=()
for run in $(seq 1 10); do
    torch_job 2 "$(free_port)" "$TEST_DIR/k$run" $P loop
    if ! wait_ready 2 "$TEST_DIR/k$run"; then fail "run $run: never ready: $(cat "$TEST_DIR/k$run".*.err)"; continue; fi
    vpid=${JOB_PIDS[1]}
    disown "$vpid"
    t0=$(date +%s%N)
    kill -9 "$vpid"
    wait_status "${JOB_PIDS[0]}"
    ms=$((($(date +%s%N) - t0) / 1000000))
    cb=$(sed -n 's/^fate_cb_ns=//p' "$TEST_DIR/k$run.0.err")
    [ -n "$cb" ] && learned+=($(((cb - t0) / 1000000)))
    [ "$ST" = 70 ] && times+=($ms) || fail "run $run: survivor status $ST: $(tail -3 "$TEST_DIR/k$run.0.err")"
done
median_of() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
median=$(median_of "${times[@]}")
lsorted=$(printf '%s\n' "${learned[@]}" | sort -n | tr '\n' ' ')
lmedian=$(median_of "${learned[@]}")
echo "survivor's fate callback after the kill (ms): median $lmedian (all: $lsorted)"
echo "survivor gone after the kill (ms, its CUDA context teardown included): median $median (all: $sorted)"
# The target (survivors gone) is NCCL's at two GPUs; for two ranks staged on one GPU the process's end also waits for
# the driver to tear down both ranks' contexts on the one GPU, so there the bound is on when libtp learned of it.
bound=$([ "$gpus" -ge 2 ] && echo "$median" || echo "$lmedian")
[ "${#times[@]}" -eq 10 ] && [ "${#learned[@]}" -eq 10 ] && [ "$bound" -lt 100 ] && pass "bound met: median $bound ms" ||
    fail "kill: median $bound ms, ${#times[@]} of 10 ended 70, ${#learned[@]} callbacks"
[ "$gpus" -ge 2 ] || echo "not run: NCCL at world 2 and its kill test need two GPUs (NCCL refuses two ranks on one GPU)"

n=$((gpus >= 2 ? 2 : 1))
step "torch (NCCL backend) and libtp in one process, $n ranks"
out=$(timeout 300 "$TPRUN" -n $n python3 "$(dirname "$0")/torch_nccl.py" 2>&1)
st=$?
if [ $st -eq 77 ]; then echo "SKIP: torch: $out"
elif [ $st -eq 0 ] && [ "$(echo "$out" | grep -c ': ok')" -eq $n ]; then pass "torch: $(echo "$out" | grep -m1 ': ok')"
else fail "torch (status $st)"; echo "$out" | tail -20; fi

step "benchmark, $n ranks"
timeout 600 "$TPRUN" -n $n $P bench 2>&1 || fail "bench"
finish
