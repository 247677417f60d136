#!/bin/bash
# Agents started as a tree (TP_LAUNCH_FANOUT=2) on 16 test hosts: output and ends travel up through the agents; an
# interior agent killed (at depth 1 and 2), ssh to a leaf refused, tprun SIGKILLed and Ctrl-C each end every rank
# on every host, tprun names the lost hosts, and nothing is left running anywhere.
. "$(dirname "$0")/ssh_tree_lib.sh"
export TP_LAUNCH_FANOUT=2
# With fan-out 2, agent i's children are agents 2(i+1) and 2(i+1)+1: h0 starts h2 and h3, h1 starts h4 and h5,
# h2 starts h6 and h7, h6 starts h14 and h15.
HOSTS=$(seq -s, -f 'h%g' 0 $((TREE_HOSTS - 1)))
N=$TREE_HOSTS

# start_job NAME: tprun -n N of blocking ranks, one per host, in the background from h0; RANK_PIDS once all are
# ready.
start_job() {
    : >"$D/$1.out" # before the background job opens it: the polling below reads it at once
    # INT at its default: a script's background jobs ignore it, and tprun keeps what it finds ignored.
    ip netns exec "$(ns_of 0)" env --default-signal=INT,TERM,HUP "$TPRUN" --ssh "$SSH" -n "$N" -H "$HOSTS" \
        "$RANK_PROG" block >"$D/$1.out" 2>"$D/$1.err" &
    TP_PID=$!
    TEST_PIDS+=($TP_PID)
    local end=$((SECONDS + 60))
    while [ "$(grep -c '^ready' "$D/$1.out")" -lt "$N" ] && [ "$SECONDS" -lt "$end" ] && alive "$TP_PID"; do
        sleep 0.05
    done
    RANK_PIDS=$(sed -n 's/^ready rank [0-9]* of [0-9]* pid \([0-9]*\) .*/\1/p' "$D/$1.out")
    [ "$(echo $RANK_PIDS | wc -w)" = "$N" ]
}

# end_case NAME STATUS FIRST_LINE_PATTERN: waits for tprun, checks its status, its first line, that every rank is
# gone and that no host has anything left.
end_case() {
    local name=$1 want=$2 pattern=$3 st first
    { wait "$TP_PID"; } 2>/dev/null
    st=$?
    first=$(grep -m1 '^tprun: ' "$D/$name.err")
    [ "$st" = "$want" ] || fail "$name: tprun status $st, expected $want: $(cat "$D/$name.err")"
    echo "$first" | grep -q -- "$pattern" || fail "$name: first line '$first', expected /$pattern/"
    # Bounded by the clock: after tprun's SIGKILL its ranks end as the news travels down the tree.
    local end=$((SECONDS + 10))
    while any_alive $RANK_PIDS && [ "$SECONDS" -lt "$end" ]; do sleep 0.05; done
    any_alive $RANK_PIDS && fail "$name: ranks survived 10 s: $(for p in $RANK_PIDS; do alive "$p" && echo "$p"; done)"
    wait_no_leftovers 10 || fail "$name: left running: $(leftovers)"
}

step "a run through the tree"
if start_job run; then
    # tprun's own ssh connections: to h0 and h1 only, the agents started the other 14.
    kids=0
    for p in $(ps -o pid= --ppid "$TP_PID"); do [ "$(comm_of "$p")" = ssh ] && kids=$((kids + 1)); done
    [ "$kids" = 2 ] && pass "tprun started 2 ssh connections for $N hosts" ||
        fail "tprun has $kids ssh children, expected 2"
    seen=$(sed -n 's/^ready rank \([0-9]*\) of .*/\1/p' "$D/run.out" | sort -n | tr '\n' ' ')
    [ "$seen" = "$(seq -s' ' 0 $((N - 1))) " ] && pass "every rank's output came up the tree" ||
        fail "ranks' output: $seen"
    kill -INT "$TP_PID"
    end_case run 130 '^tprun: rank [0-9]* (host h[0-9]*, pid [0-9]*) killed by signal 2 (SIGINT), forwarded by tprun' 
    [ "$fails" = 0 ] && pass "Ctrl-C: tprun exited 130, every rank on every host gone"
else
    fail "ranks never got ready: $(cat "$D/run.out" "$D/run.err")"
fi

# kill_agent NAME HOST DEPTH_PATTERN LOST_HOSTS: the agent of host HOST SIGKILLed under a running job.
kill_agent() {
    local name=$1 host=$2 pattern=$3 lost=$4 before=$fails h
    step "$name"
    if ! start_job "$name"; then
        fail "$name: ranks never got ready: $(cat "$D/$name.out" "$D/$name.err")"
        return
    fi
    kill -KILL $(agent_on "$host")
    end_case "$name" 137 "$pattern"
    for h in $lost; do
        grep -q "^tprun: host h$h: lost with host h$host (whose agent started it); rank $h there counts as killed" \
            "$D/$name.err" || fail "$name: h$h not named lost with h$host: $(cat "$D/$name.err")"
    done
    [ "$fails" = "$before" ] && pass "$name: status 137; $(grep -c 'lost with' "$D/$name.err") hosts named lost below it"
}
kill_agent "interior agent h1 killed" 1 "^tprun: host h1: the agent's connection ended before rank 1 there ended" \
    "4 5 10 11 12 13"
kill_agent "agent h2 below h0 killed" 2 \
    "^tprun: host h2: the agent's connection ended before rank 2 there ended (last message: the ssh connection from host h0 ended)" \
    "6 7 14 15"

step "tprun SIGKILLed"
if start_job sigkill; then
    kill -KILL "$TP_PID"
    before=$fails
    end_case sigkill 137 ''
    [ "$fails" = "$before" ] && pass "tprun SIGKILLed: every rank on every host gone, nothing left"
else
    fail "tprun SIGKILLed: ranks never got ready: $(cat "$D/sigkill.out" "$D/sigkill.err")"
fi

step "ssh to a leaf refused"
before=$fails
# h15's place (a leaf under h6) goes to "refuses": h6's ssh to it fails at once.
ip netns exec "$(ns_of 0)" "$TPRUN" --ssh "$SSH" -n "$N" -H "${HOSTS%,h*},refuses" "$RANK_PROG" block \
    >"$D/leaf.out" 2>"$D/leaf.err" &
TP_PID=$!
TEST_PIDS+=($TP_PID)
RANK_PIDS=
end_case leaf 125 \
    '^tprun: host refuses: the launch failed: ssh from host h6 said: ssh: connect to host 198.18.20.1 port 2222: Connection refused$'
grep -q '^ready' "$D/leaf.out" && fail "a rank started although the launch failed: $(cat "$D/leaf.out")"
[ "$fails" = "$before" ] && pass "ssh to a leaf refused: status 125, named with the agent that tried"
finish
