#!/bin/bash
# tprun --pmix: a plain PMIx program gets its world, fence and get; PMIx_Abort ends the job with its status; a
# rank's death is notified to the survivors before tprun's teardown; the server's tmpdir never stays behind.
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/pmix_lib.sh"
have_pmix_build || skip "tprun built without PMIx"
CLIENT=./tests/pmix_client
[ -x "$CLIENT" ] || skip "no $CLIENT (built only with PMIx)"
unset TP_PMIX TP_RANK TP_LOG_LEVEL
# The server makes its directory under TMPDIR: a private one shows exactly what it leaves behind.
export TMPDIR=$TEST_DIR/tmp
mkdir -p "$TMPDIR"
host=$(hostname)
leftover() { ls -d "$TMPDIR"/tprun-pmix.* 2>/dev/null; }
tprun_pmix() {
    local limit=$1
    shift
    timeout -k 5 "$limit" "$TPRUN" "$@"
}

# World, locality, node and a peer's data after a collecting fence; by --pmix and by TP_PMIX=1.
check_world() {
    local what=$1 n=$2 out=$3 st=$4 ok=1
    for ((r = 0; r < n; r++)); do
        local p=$(((r + 1) % n))
        echo "$out" | grep -q "^rank $r size $n local $r/$n peers $(seq -s, 0 $((n - 1))) node 0 host $host nspace tprun\.[^ ]* peer $p says ep-of-rank-$p-pid-" || ok=0
    done
    [ "$st" -eq 0 ] && [ $ok = 1 ] && pass "$what" || fail "$what: status $st: $out"
}
step "info: world, locality, node and a peer's data, by --pmix and by TP_PMIX=1"
out=$(tprun_pmix 30 --pmix -n 4 "$CLIENT" info 2>&1)
check_world "--pmix -n 4: rank, job size, local size, local peers, node id, peer data after a fence" 4 "$out" $?
out=$(TP_PMIX=1 tprun_pmix 30 -n 2 "$CLIENT" info 2>&1)
check_world "TP_PMIX=1 -n 2: the same" 2 "$out" $?
[ -z "$(leftover)" ] && pass "no tmpdir left after a normal exit" || fail "tmpdir left after a normal exit: $(leftover)"

# Purely local fences skip the host; with that optimisation off, the data goes through tprun's fence_nb.
step "Purely local fences skip the host"
out=$(PMIX_MCA_pmix_server_fence_localonly_opt=0 TP_LOG_LEVEL=debug tprun_pmix 30 --pmix -n 4 "$CLIENT" info 2>&1)
st=$?
echo "$out" | grep -q 'pmix: fence_nb over ' && check_world "fence through tprun's fence_nb: peers' data" 4 \
    "$(echo "$out" | grep '^rank')" $st || fail "fence_nb was not called: status $st: $out"

# Fences, subsets and data on demand go through tprun's fence_nb and direct modex on one host too.
step "Fences, subsets and data on demand go through tprun's fence_nb and direct modex on one..."
out=$(tprun_pmix 30 --pmix -n 4 "$CLIENT" fences 10 2>&1)
[ $? = 0 ] && [ "$(echo "$out" | grep -c 'fences over all and 10 over ranks of parity')" = 4 ] &&
    pass "10 fences over all and over each parity subset" || fail "fences: $out"
out=$(tprun_pmix 30 --pmix -n 3 "$CLIENT" dmodex 2>&1)
[ $? = 0 ] && [ "$(echo "$out" | grep -c 'every peer.s data came on demand')" = 3 ] &&
    pass "a fence without data, then every peer's data" || fail "dmodex: $out"

# How many of a failed fence's three local participants hear of the failure: all, or from libpmix 4.2.3 the first
# one (pmix_lib.sh; measured with 5.0.1). Every fence ends, and the job with it.
all=0
pmix_tells_all "$CLIENT" && all=1
# fence_end WHAT STATUS WANT-STATUS PATTERN: every survivor's fence ended (3 lines), all 3 or at least 1 with PATTERN.
fence_end() {
    n=$(echo "$out" | grep -c "^rank [012]: $4")
    [ "$2" = "$3" ] && [ "$(echo "$out" | grep -c '^rank [012]: fence')" = 3 ] && [ "$n" -ge $((all ? 3 : 1)) ] &&
        pass "$1 ($n of 3)" || fail "$1: status $2, $n of 3 with the error, $((all ? 3 : 1)) wanted: $out"
}

# A fence with a dead rank (it died after a first fence) ends with an error (PMIx's own PARTIAL-SUCCESS or tprun's
# PROC-ABORTED), never hangs.
step "A fence with a dead rank ends with an error (PMIx's own PARTIAL-SUCCESS or tprun's..."
out=$(tprun_pmix 30 --pmix -n 4 "$CLIENT" dies 3 2>&1)
fence_end "rank 3 dead: the others' fence ends with an error" $? 137 'fence with rank 3 dead: \(PROC-ABORTED\|PARTIAL SUCCESS\)$'

# A fence rank 3 never enters, with a 1 s PMIX_TIMEOUT: TIMEOUT for the others (PMIx times it out on this host).
step "A fence rank 3 never enters, with a 1 s PMIX_TIMEOUT"
out=$(tprun_pmix 30 --pmix -n 4 "$CLIENT" late 3 2>&1)
fence_end "a fence rank 3 never enters: TIMEOUT, status 1" $? 1 'fence without rank 3: TIMEOUT$'

# PMIx_Abort(7, msg) from rank 2: the first failure line names it; tprun exits 7.
step "PMIx_Abort(7, msg) from rank 2"
out=$(tprun_pmix 30 --pmix -n 4 "$CLIENT" abort 2 2>&1)
st=$?
first=$(echo "$out" | grep '^tprun:' | head -1)
[ $st -eq 7 ] && echo "$first" | grep -q "^tprun: rank 2 (host $host, pid [0-9]*) called PMIx_Abort(status 7): rank asked to abort$" &&
    ! echo "$out" | grep -q 'still alive' && pass "PMIx_Abort(7) from rank 2: exit 7, named first" ||
    fail "PMIx_Abort: status $st: $out"
[ -z "$(leftover)" ] && pass "no tmpdir left after an abort" || fail "tmpdir left after an abort: $(leftover)"

# SIGKILL of rank 1: every survivor prints PROC-ABORTED naming rank 1, then tprun tears the job down.
step "SIGKILL of rank 1"
out=$(tprun_pmix 30 --pmix -n 4 "$CLIENT" events 1 2>&1)
st=$?
ok=1
for r in 0 2 3; do echo "$out" | grep -q "^rank $r: event PROC-ABORTED affected rank 1$" || ok=0; done
[ $st -eq 137 ] && [ $ok = 1 ] && echo "$out" | grep '^tprun:' | head -1 | grep -q 'rank 1 (.*) killed by signal 9' &&
    ! echo "$out" | grep -q 'still alive' && pass "rank 1 SIGKILLed: ranks 0,2,3 got PROC-ABORTED for rank 1" ||
    fail "death notification: status $st: $out"

# start_waiting_job OUT: tprun --pmix of two ranks that wait to be ended, in the background; tp is tprun's pid,
# ranks its ranks' pids (its own children: another test's clients, here or in another tree, have the same
# command line) and dir its server's directory once both ranks run (test-only polling: nothing else signals
# readiness).
start_waiting_job() {
    "$TPRUN" --pmix -n 2 "$CLIENT" abort -1 >"$1" 2>&1 &
    tp=$!
    STARTED_PIDS+=($tp)
    for _ in $(seq 1 1000); do
        ranks=$(pgrep -P "$tp" -x pmix_client)
        [ -n "$(leftover)" ] && [ "$(echo $ranks | wc -w)" = 2 ] && break
        sleep 0.01
    done
    [ "$(echo $ranks | wc -w)" = 2 ] || fail "tprun $tp: expected 2 waiting ranks, saw '$ranks'"
    dir=$(leftover)
}

# tprun SIGKILLed: the keeper kills the ranks and removes the server's tmpdir.
step "tprun SIGKILLed"
start_waiting_job "$TEST_DIR/killed.out"
kill -9 "$tp"
wait "$tp" 2>/dev/null
for _ in $(seq 1 500); do
    [ -z "$(leftover)" ] && ! any_alive $ranks && break
    sleep 0.01
done
[ -n "$dir" ] && [ -z "$(leftover)" ] && ! any_alive $ranks &&
    pass "tprun SIGKILLed: its keeper removed $dir and the ranks are gone" ||
    fail "after SIGKILL of tprun: tmpdir before '$dir', now '$(leftover)'; $(cat "$TEST_DIR/killed.out")"

# refused NAME PATTERN CMD...: CMD (a tprun --pmix whose rank would touch $TEST_DIR/started) exits 2 with a first
# line matching PATTERN, starts nothing and leaves no server directory.
refused() {
    local name=$1 pattern=$2
    shift 2
    rm -f "$TEST_DIR/started"
    out=$("$@" 2>&1)
    st=$?
    [ $st -eq 2 ] && echo "$out" | grep -q "$pattern" && [ ! -e "$TEST_DIR/started" ] && [ -z "$(leftover)" ] &&
        pass "$name: named, status 2, nothing started" || fail "$name: status $st: $out"
}

# A bad libpmix.so.2 first on the loader's path.
step "A bad libpmix.so.2 first on the loader's path"
echo 'int not_pmix;' >"$TEST_DIR/fake.c"
if ${CC:-cc} -shared -fPIC -o "$TEST_DIR/libpmix.so.2" "$TEST_DIR/fake.c" 2>/dev/null; then
    refused "bad libpmix.so.2" '^tprun: --pmix: cannot load libpmix.so.2: .*libpmix.so.2 lacks PMIx_server_init' \
        env LD_LIBRARY_PATH="$TEST_DIR" timeout -k 5 30 "$TPRUN" --pmix -n 2 sh -c "touch $TEST_DIR/started"
else
    echo "skip: no C compiler for the fake libpmix"
fi

# No libpmix at all: its directory hidden by a tmpfs in a private mount namespace.
step "No libpmix at all"
PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2
if [ "$(id -u)" = 0 ] && [ -d "$PMIX_DIR" ] && unshare -m true 2>/dev/null; then
    refused "missing libpmix.so.2" '^tprun: --pmix: cannot load libpmix.so.2: libpmix.so.2: cannot open shared object file' \
        unshare -m sh -c "mount -t tmpfs tmpfs $PMIX_DIR && timeout -k 5 30 $TPRUN --pmix -n 2 sh -c 'touch $TEST_DIR/started'"
else
    echo "skip: hiding libpmix needs root, unshare and $PMIX_DIR"
fi

# SIGTERM to tprun: forwarded, the ranks end, tprun removes the server's directory itself (no keeper needed).
step "SIGTERM to tprun"
start_waiting_job "$TEST_DIR/term.out"
kill -TERM "$tp"
wait "$tp"
st=$?
[ -n "$dir" ] && [ $st -eq 143 ] && [ -z "$(leftover)" ] && ! any_alive $ranks &&
    pass "tprun SIGTERMed: status 143, ranks gone, $dir removed" ||
    fail "after SIGTERM of tprun: status $st, tmpdir before '$dir', now '$(leftover)'; $(cat "$TEST_DIR/term.out")"

# libtp engines under --pmix take their world from tprun's PMIx server and bootstrap through it (no TP_* rank
# contract); collectives and fate work as under tprun's own contract.
step "libtp engines under --pmix take their world from tprun's PMIx server and bootstrap..."
out=$(tprun_pmix 30 --pmix -n 3 "$RANK_PROG" boot 2>&1)
[ $? -eq 0 ] && [ "$(echo "$out" | grep -c '^ready rank [0-2] of 3 pid [0-9]* local [0-2]/3 node 0 job pmix-tprun\.')" = 3 ] &&
    pass "libtp ranks under --pmix bootstrap through PMIx" || fail "libtp under --pmix: $out"
out=$(TP_PART_BYTES=64K tprun_pmix 60 --pmix -n 3 ./tests/coll_check 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q 'coll_check: 3 ranks.*all match' && pass "coll_check under --pmix" ||
    fail "coll_check under --pmix: $(echo "$out" | tail -5)"
out=$(tprun_pmix 30 --pmix -n 3 "$RANK_PROG" die 1 9 2>&1)
st=$?
[ $st -eq 137 ] && echo "$out" | grep '^tprun:' | head -1 | grep -q 'rank 1 (.*) killed by signal 9' &&
    echo "$out" | grep -q 'callback: rank [02] saw peer 1' && pass "fate of libtp ranks under --pmix: rank 1 named, peers told" ||
    fail "fate under --pmix: status $st: $out"

# Under --pmix rank 0 does not inherit tprun's bootstrap listener, and MASTER_PORT (reserved by tprun) is for the
# engine's store: bound with SO_REUSEADDR and listening, as PyTorch's TCPStore does.
step "Under --pmix MASTER_PORT is free for the engine's store"
out=$(tprun_pmix 30 --pmix -n 2 python3 -c "import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
if os.environ['RANK'] == '0': s.bind(('127.0.0.1', int(os.environ['MASTER_PORT']))); s.listen()
print('rank', os.environ['RANK'], 'ok')" 2>&1)
[ $? -eq 0 ] && [ "$(echo "$out" | grep -c '^rank [01] ok$')" = 2 ] && pass "under --pmix rank 0 can bind MASTER_PORT" ||
    fail "MASTER_PORT under --pmix: $out"

# Without --pmix nothing of PMIx reaches the ranks.
step "Without --pmix nothing of PMIx reaches the ranks"
out=$(tprun_pmix 30 -n 1 sh -c 'env | grep "^PMIX_" | sort' 2>&1)
[ "$out" = "$(env | grep '^PMIX_' | sort)" ] && pass "plain tprun adds no PMIX_* variable" ||
    fail "plain tprun: the rank has $out; the caller has $(env | grep '^PMIX_' | sort)"
finish
