#!/bin/bash
# tprun --pmix across hosts: each host's agent hosts a PMIx server and tprun matches their fences and data
# requests. A plain PMIx client sees its world and a peer's data on other hosts; aborts and deaths on another
# host reach tprun and the survivors; no server directory is left on any host; a host whose libpmix is bad
# fails the launch by name. Runs on the namespace hosts of tests/netns_lib.sh (root only).
. "$(dirname "$0")/netns_lib.sh"
. "$(dirname "$0")/pmix_lib.sh"
grep -q '^#define HAVE_PMIX 1' ./config.h 2>/dev/null || { echo "skip: tprun built without PMIx"; exit 77; }
CLIENT=$PWD/tests/pmix_client
[ -x "$CLIENT" ] || { echo "skip: no $CLIENT (built only with PMIx)"; exit 77; }
unset TP_PMIX TP_LOG_LEVEL
# A failed fence's status reaches every participant, or from libpmix 4.2.3 the first on each host (pmix_lib.sh).
all=0
pmix_tells_all "$CLIENT" && all=1
# Every host's server makes its directory under this TMPDIR (tprun's from its environment, the agents' from -x).
export TMPDIR=$D/tmp
mkdir -p "$TMPDIR"
leftover() { ls -d "$TMPDIR"/tprun-pmix.* 2>/dev/null; }
pmix_on_a() { tprun_on_a --pmix -x TMPDIR="$TMPDIR" "$@"; }

# World, locality, node ids, host names and a peer's data on another host, after a collecting fence.
step "info -n 4 -H a:2,b:2"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$CLIENT" info 2>&1)
st=$?
ok=1
for r in 0 1 2 3; do
    node=$((r / 2)) host=$([ $r -lt 2 ] && echo a || echo b) peers=$([ $r -lt 2 ] && echo 0,1 || echo 2,3)
    p=$(((r + 1) % 4))
    echo "$out" | grep -q "^rank $r size 4 local $((r % 2))/2 peers $peers node $node host $host nspace tprun\.[^ ]* peer $p says ep-of-rank-$p-pid-" || ok=0
done
[ $st = 0 ] && [ $ok = 1 ] && pass "-H a:2,b:2: rank, sizes, local peers, node and host per host; peer data across hosts" ||
    fail "info across hosts: status $st: $out"

# Ranks on this machine (tprun's own server) with ranks on b and c (their agents' servers).
step "info -n 4 -H localhost:1,b:2,c:1"
out=$(TMPDIR=$TMPDIR in_ns a "$TPRUN" --ssh "$SSH" --pmix -x TMPDIR="$TMPDIR" -n 4 -H localhost:1,b:2,c:1 "$CLIENT" info 2>&1)
st=$?
me=$(hostname)
ok=1
for want in "rank 0 size 4 local 0/1 peers 0 node 0 host $me " "rank 1 size 4 local 0/2 peers 1,2 node 1 host b " \
    "rank 2 size 4 local 1/2 peers 1,2 node 1 host b " "rank 3 size 4 local 0/1 peers 3 node 2 host c .* peer 0 says ep-of-rank-0-"; do
    echo "$out" | grep -q "^$want" || ok=0
done
[ $st = 0 ] && [ $ok = 1 ] && pass "-H localhost:1,b:2,c:1: tprun's server and two agents' in one namespace" ||
    fail "mixed local and remote: status $st: $out"

# Fences without data: each peer's data is fetched from its own host on demand (direct modex through tprun).
step "dmodex -n 4 -H a:2,b:2"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$CLIENT" dmodex 2>&1)
st=$?
[ $st = 0 ] && [ "$(echo "$out" | grep -c 'every peer.s data came on demand')" = 4 ] &&
    pass "fence without data, then Get of every peer: data fetched from the other host" || fail "dmodex: status $st: $out"

# Many fences in a row, over everyone and over two interleaved subsets spanning both hosts.
step "fences 25 -n 4 -H a:2,b:2"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$CLIENT" fences 25 2>&1)
st=$?
[ $st = 0 ] && [ "$(echo "$out" | grep -c 'fences over all and 25 over ranks of parity')" = 4 ] &&
    pass "25 fences over all ranks and 25 over each parity subset, data checked each round" ||
    fail "fences: status $st: $out"

# Rank 3 (alone on c) never enters a fence that has a 1 s PMIX_TIMEOUT: the others get TIMEOUT from tprun, which
# names host c (a rank sharing a host with the late one would get PMIx's own local TIMEOUT instead).
step "late 3 -n 4 -H a:2,b:1,c:1 (a fence with a 1 s timeout)"
out=$(pmix_on_a -n 4 -H a:2,b:1,c:1 "$CLIENT" late 3 2>&1)
st=$?
n=$(echo "$out" | grep -c '^rank [012]: fence without rank 3: TIMEOUT$')
echo "$out" | grep -q '^tprun: PMIx fence over ranks \* (#0) timed out: host c never entered it$' &&
    [ "$(echo "$out" | grep -c '^rank [012]: fence without rank 3: ')" = 3 ] && [ "$n" -ge $((all ? 3 : 2)) ] && [ $st = 1 ] &&
    pass "a fence rank 3 never enters: TIMEOUT on a and b, tprun names host c, status 1" || fail "late: status $st: $out"
[ -z "$(leftover)" ] && pass "no server directory left on any host after the jobs" ||
    fail "server directories left: $(leftover)"

# Rank 3 (on b) dies between two fences: the ranks on a get an error from the second at once, not a hang until the
# teardown.
step "dies 3 -n 4 -H a:2,b:2"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$CLIENT" dies 3 2>&1)
st=$?
n=$(echo "$out" | grep -c '^rank [01]: fence with rank 3 dead: PROC-ABORTED$')
[ $st = 137 ] && [ "$(echo "$out" | grep -c '^rank [01]: fence with rank 3 dead: ')" = 2 ] && [ "$n" -ge $((all ? 2 : 1)) ] &&
    pass "rank 3 dead on b: the fence on a ends with PROC-ABORTED" || fail "dies: status $st: $out"

# PMIx_Abort(7) from rank 2 on b: tprun exits 7 and names it first.
step "abort 2 -n 4 -H a:2,b:2"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$CLIENT" abort 2 2>&1)
st=$?
first=$(echo "$out" | grep '^tprun:' | head -1)
[ $st -eq 7 ] && echo "$first" | grep -q "^tprun: rank 2 (host b, pid [0-9]*) called PMIx_Abort(status 7): rank asked to abort$" &&
    ! echo "$out" | grep -q 'still alive' && pass "PMIx_Abort(7) on b: exit 7, named first" ||
    fail "abort across hosts: status $st: $out"

# SIGKILL of rank 2 on b: the survivors on both hosts get PROC-ABORTED for rank 2 before the teardown.
step "events 2 -n 4 -H a:2,b:2"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$CLIENT" events 2 2>&1)
st=$?
ok=1
for r in 0 1 3; do echo "$out" | grep -q "^rank $r: event PROC-ABORTED affected rank 2$" || ok=0; done
[ $st -eq 137 ] && [ $ok = 1 ] && echo "$out" | grep '^tprun:' | head -1 | grep -q 'rank 2 (host b, pid [0-9]*) killed by signal 9' &&
    pass "rank 2 SIGKILLed on b: ranks 0, 1 (on a) and 3 (on b) got PROC-ABORTED for rank 2" ||
    fail "death notification across hosts: status $st: $out"
wait_no_leftovers 5 || fail "left running: $(leftovers)"
[ -z "$(leftover)" ] && pass "no server directory left after the abort and the death" || fail "left: $(leftover)"

# b's agent SIGKILLed, then tprun SIGKILLed: the keepers remove what the dead processes could not; then tprun
# SIGTERMed: every agent ends its ranks and removes its own directory.
# waiting_clients: the pids of this test's waiting clients (in its own hosts, so another test's are not counted).
waiting_clients() {
    local p
    for p in $(ip netns pids "$NS_A") $(ip netns pids "$NS_B"); do
        [ "$(cmdline_of "$p")" = "$CLIENT abort -1" ] && alive "$p" && echo "$p"
    done
}
for victim in agent tprun term; do
    step "tprun --pmix -n 4 -H a:2,b:2, then $victim killed"
    # ip netns exec execs tprun: $! is tprun itself (in_ns, a shell function, would give a subshell's pid).
    ip netns exec "$NS_A" "$TPRUN" --ssh "$SSH" --pmix -x TMPDIR="$TMPDIR" -n 4 -H a:2,b:2 "$CLIENT" abort -1 \
        >"$D/$victim.out" 2>&1 &
    tp=$!
    TEST_PIDS+=($tp)
    for _ in $(seq 1 400); do
        [ "$(leftover | wc -l)" -ge 3 ] && [ "$(waiting_clients | wc -l)" = 4 ] && break
        sleep 0.025
    done
    clients=$(waiting_clients)
    # The pid signalled below must be tprun's own, or the check of what is left proves nothing.
    [ "$(comm_of "$tp")" = tprun ] || fail "$victim: pid $tp is not tprun but '$(comm_of "$tp")'"
    dirs=$(leftover | wc -l)
    if [ $victim = agent ]; then
        # The agent only: its keeper (a fork, comm tprun-keeper) has the same command line and must live to clean up.
        for p in $(ip netns pids "$NS_B"); do
            [ "$(comm_of "$p")" = tprun ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--agent' &&
                kill -KILL "$p"
        done
    elif [ $victim = tprun ]; then
        # In a block without stderr: bash prints a "Killed" notice when it sees tprun SIGKILLed.
        {
            kill -KILL "$tp"
            wait "$tp"
        } 2>/dev/null
    else
        kill -TERM "$tp"
    fi
    wait "$tp" 2>/dev/null
    st=$?
    [ $victim = term ] && [ $st != 143 ] && fail "tprun SIGTERMed: status $st, expected 143"
    [ "$(echo $clients | wc -w)" = 4 ] || fail "$victim: expected 4 waiting clients, saw '$clients'"
    wait_no_leftovers 5 && [ -z "$(waiting_clients)" ] || fail "$victim killed: left running: $(leftovers)"
    for _ in $(seq 1 200); do [ -z "$(leftover)" ] && break; sleep 0.025; done
    [ "$dirs" = 3 ] && [ -z "$(leftover)" ] && pass "$victim killed: every rank gone, all 3 server directories removed" ||
        fail "$victim killed: $dirs directories before, left: '$(leftover)'; $(cat "$D/$victim.out")"
done

# A host whose libpmix.so.2 is not PMIx: the launch fails naming the host and the library; nothing runs anywhere.
step "a bad libpmix.so.2 on b"
mkdir -p "$D/fakelib"
echo 'int not_pmix;' >"$D/fake.c"
if ${CC:-cc} -shared -fPIC -o "$D/fakelib/libpmix.so.2" "$D/fake.c" 2>/dev/null; then
    # The agent on b starts with the fake first on its loader path (the ssh command adds it to the remote command).
    cat >"$D/ssh-badlib" <<SSHEOF
#!/bin/bash
args=("\$@")
last=\${args[\$((\$# - 1))]}
[ "\${args[\$((\$# - 2))]}" = b ] && args[\$((\$# - 1))]="exec env LD_LIBRARY_PATH=$D/fakelib \${last#exec }"
exec $SSH "\${args[@]}"
SSHEOF
    chmod +x "$D/ssh-badlib"
    out=$(in_ns a "$TPRUN" --ssh "$D/ssh-badlib" --pmix -x TMPDIR="$TMPDIR" -n 4 -H a:2,b:2 sh -c "touch $D/started.\$TP_RANK" 2>&1)
    st=$?
    [ $st = 125 ] && echo "$out" | grep -q "^tprun: host b: the launch failed: --pmix: cannot load libpmix.so.2: .*libpmix.so.2 lacks PMIx_server_init" &&
        [ -z "$(ls "$D"/started.* 2>/dev/null)" ] && pass "bad libpmix.so.2 on b: status 125 naming host b and the library; no rank started" ||
        fail "bad libpmix on b: status $st: $out"
    wait_no_leftovers 5 || fail "bad libpmix: left running: $(leftovers)"
    [ -z "$(leftover)" ] && pass "bad libpmix on b: no server directory left (a's agent had made one)" || fail "left: $(leftover)"
else
    echo "skip: no C compiler for the fake libpmix"
fi

# libtp engines under --pmix across hosts bootstrap through the servers' fence (rank 0's address and key), then
# run their collectives as without it.
step "libtp boot and coll_check under --pmix across hosts"
out=$(pmix_on_a -n 4 -H a:2,b:2 "$RANK_PROG" boot 2>&1)
[ $? = 0 ] && [ "$(echo "$out" | grep -c '^ready rank [0-3] of 4 pid [0-9]* local [01]/2 node [01] job pmix-tprun\.')" = 4 ] &&
    pass "libtp ranks under --pmix across hosts bootstrap through PMIx" || fail "libtp boot under --pmix: $out"
out=$(TMPDIR=$TMPDIR in_ns a "$TPRUN" --ssh "$SSH" --pmix -x TMPDIR="$TMPDIR" -n 3 -H localhost:1,b:1,c:1 "$RANK_PROG" boot 2>&1)
[ $? = 0 ] && [ "$(echo "$out" | grep -c '^ready rank [0-2] of 3 pid [0-9]* local 0/1 node [0-2] job pmix-tprun\.')" = 3 ] &&
    pass "libtp ranks under --pmix on this host and two agents' hosts bootstrap through PMIx" ||
    fail "libtp mixed boot under --pmix: $out"
out=$(TP_PART_BYTES=64K pmix_on_a -n 4 -H a:2,b:2 ./tests/coll_check 2>&1) &&
    pass "coll_check under --pmix across hosts: $(echo "$out" | grep -m1 'coll_check:')" || fail "coll_check --pmix: $(echo "$out" | tail -5)"
finish
