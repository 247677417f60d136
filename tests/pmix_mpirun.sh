#!/bin/bash
# libtp under Open MPI's mpirun: world from PMIx, rank 0's address through one fence, then the usual bootstrap,
# settings agreement, collectives and fate (which must not need PMIx events: mpirun 4.1 delivers none).
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/pmix_lib.sh"
have_pmix_build || skip "libtp built without PMIx"
command -v "$MPIRUN" >/dev/null || skip "no $MPIRUN (install openmpi-bin)"

step "mpirun -n 1 and -n 4: boot"
for n in 1 4; do
    out=$(mpirun_n 30 "$n" "$RANK_PROG" boot 2>&1)
    st=$?
    ids=$(echo "$out" | grep '^ready' | sed 's/.* job //' | sort -u)
    ok=1
    for ((r = 0; r < n; r++)); do
        echo "$out" | grep -q "^ready rank $r of $n pid [0-9]* local $r/$n node 0 job pmix-" || ok=0
    done
    [ $st -eq 0 ] && [ $ok = 1 ] && [ "$(echo "$ids" | wc -l)" = 1 ] && pass "mpirun -n $n: rank, size, locality, one job id" ||
        fail "mpirun -n $n: status $st: $out"
done

step "coll_check under mpirun -n 4"
out=$(TP_PART_BYTES=64K mpirun_n 120 4 ./tests/coll_check 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q 'coll_check: 4 ranks.*all match' && pass "coll_check under mpirun -n 4" ||
    fail "coll_check under mpirun: $(echo "$out" | grep -v 'cannot reduce' | tail -20)"

# The same settings agreement as under tprun: rank 3 gives another value.
step "The same settings agreement as under tprun"
out=$(mpirun_n 30 4 sh -c 'exec "$0" boot --setting model=m$((PMIX_RANK / 3))' "$RANK_PROG" 2>&1)
st=$?
[ $st -ne 0 ] && echo "$out" | grep -q 'setting model differs: m0 on ranks 0-2, m1 on rank 3' &&
    pass "settings mismatch named under mpirun" || fail "settings mismatch: status $st: $out"

# Fate over the TCP star: a rank killed after tp_init; the survivors' callbacks name it before mpirun acts.
step "Fate over the TCP star"
out=$(mpirun_n 30 3 "$RANK_PROG" die 1 9 2>&1)
st=$?
echo "$out" | grep -q 'callback: rank [02] saw peer 1 (.*) fail' && pass "fate under mpirun: peer 1's death seen" ||
    fail "fate under mpirun: status $st: $out"

# A rank that never reaches tp_init: the fence fails at TP_BOOT_TIMEOUT and says so; no hang. libtp names PMIx's
# statuses as the library spells them: TIMEOUT in PMIx 4, PMIX_ERR_TIMEOUT in PMIx 5.
step "A rank that never reaches tp_init"
start=$(date +%s)
out=$(mpirun_n 30 3 -x TP_BOOT_TIMEOUT=2 sh -c '[ "$PMIX_RANK" = 2 ] && exec sleep 25; exec "$0" boot' \
    "$RANK_PROG" 2>&1)
st=$?
took=$(($(date +%s) - start))
[ $st -ne 0 ] && [ $took -lt 20 ] && echo "$out" | grep -q 'PMIx_Fence (collecting .*) failed: \(PMIX_ERR_\)\?TIMEOUT' &&
    pass "fence timeout named after TP_BOOT_TIMEOUT (${took}s)" || fail "fence timeout: status $st after ${took}s: $out"

# PMIx variables without a reachable server: an error naming PMIx_Init's cause, at once.
step "PMIx variables without a reachable server"
out=$(PMIX_NAMESPACE=gone PMIX_RANK=0 PMIX_SERVER_URI41='gone.0;tcp4://127.0.0.1:1' timeout -k 2 10 \
    "$RANK_PROG" boot 2>&1)
st=$?
[ $st -eq 1 ] && echo "$out" | grep -q 'PMIx_Init failed: \(UNREACHABLE\|PMIX_ERR_UNREACH\)' && pass "unreachable server named" ||
    fail "unreachable server: status $st: $out"

# A bad libpmix.so.2 first on the loader's path: an error naming what it lacks, not a crash.
step "A bad libpmix.so.2 first on the loader's path"
echo 'int not_pmix;' >"$TEST_DIR/fake.c"
if ${CC:-cc} -shared -fPIC -o "$TEST_DIR/libpmix.so.2" "$TEST_DIR/fake.c" 2>/dev/null; then
    out=$(mpirun_n 30 2 -x LD_LIBRARY_PATH="$TEST_DIR" "$RANK_PROG" boot 2>&1)
    st=$?
    [ $st -ne 0 ] && echo "$out" | grep -q 'libpmix.so.2 lacks PMIx_Init: not a usable PMIx 4 library' &&
        ! echo "$out" | grep -qi 'segmentation\|signal 11' && pass "bad libpmix named" || fail "bad libpmix: status $st: $out"
else
    echo "skip: no C compiler for the fake libpmix"
fi

# No libpmix at all (its directory hidden in a private mount namespace): started by a PMIx server, a rank says
# it cannot use libpmix and fails at once, naming the file; it never runs as a singleton.
step "No libpmix at all (its directory hidden in a private mount namespace)"
PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2
if [ "$(id -u)" = 0 ] && [ -d "$PMIX_DIR" ] && unshare -m true 2>/dev/null; then
    out=$(unshare -m sh -c "mount -t tmpfs tmpfs $PMIX_DIR && PMIX_NAMESPACE=x PMIX_RANK=0 timeout -k 2 20 $RANK_PROG boot" 2>&1)
    st=$?
    [ $st -ne 0 ] && echo "$out" | grep -q 'started by a PMIx server (PMIX_NAMESPACE=x) but cannot use libpmix.so.2: libpmix.so.2: cannot open shared object file' &&
        ! echo "$out" | grep -q '^ready' && pass "missing libpmix named" || fail "missing libpmix: status $st: $out"
else
    echo "skip: hiding libpmix needs root, unshare and $PMIX_DIR"
fi

# tprun's own contract wins over inherited PMIx variables.
step "tprun's own contract wins over inherited PMIx variables"
out=$(PMIX_NAMESPACE=gone PMIX_RANK=0 timeout -k 2 20 "$TPRUN" -n 2 "$RANK_PROG" boot 2>&1)
[ $? -eq 0 ] && [ "$(echo "$out" | grep '^ready' | grep -vc ' job pmix-')" = 2 ] &&
    pass "TP_RANK wins over PMIX_*" || fail "TP_RANK vs PMIX_*: $out"
finish
