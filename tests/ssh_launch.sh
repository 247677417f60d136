#!/bin/bash
# The ssh launcher across three namespace hosts: placement, the rank environment, output, the multi-rank
# bootstrap and collectives tests, and launches that must fail naming the host with nothing left running.
. "$(dirname "$0")/netns_lib.sh"

# Placement and TP_NODE_RANK / TP_LOCAL_RANK: by slot, then by node.
step "placement: -n 4 -H a:2,b:2 and -n 6 -H a:2,b:2,c:2 --map-by node"
out=$(tprun_on_a -n 4 -H a:2,b:2 "$RANK_PROG" boot 2>&1)
st=$?
for want in "ready rank 0 of 4 .* local 0/2 node 0" "ready rank 1 of 4 .* local 1/2 node 0" \
    "ready rank 2 of 4 .* local 0/2 node 1" "ready rank 3 of 4 .* local 1/2 node 1"; do
    echo "$out" | grep -q "^$want" || { fail "-H a:2,b:2: no line '$want' (status $st): $out"; break; }
done
[ $st = 0 ] && pass "-n 4 -H a:2,b:2 boot"
out=$(tprun_on_a -n 6 -H a:2,b:2,c:2 --map-by node "$RANK_PROG" boot 2>&1)
st=$?
ok=1
for r in 0 1 2 3 4 5; do
    node=$((r % 3)) local=$((r / 3))
    echo "$out" | grep -q "^ready rank $r of 6 .* local $local/2 node $node " || ok=0
done
[ $st = 0 ] && [ $ok = 1 ] && pass "-n 6 --map-by node deals ranks over a, b, c" || fail "--map-by node: $st: $out"

# The rank environment on a remote host: TP_HOST, -x variables, the working directory, and the key never on argv.
step "the rank environment on hosts a, b, c; --wdir and --tag-output"
mkdir -p "$D/work"
cat >"$D/work/env.sh" <<'EOF'
#!/bin/sh
echo "env $TP_RANK host=$TP_HOST node=$TP_NODE_RANK local=$TP_LOCAL_RANK/$TP_LOCAL_WORLD_SIZE x=$TEST_X y=$TEST_Y pwd=$(pwd)"
# One grep (fast under load), its pattern in a file: on its argv the key would be found by the other ranks' grep.
pat=$(mktemp) && printf '%s\n' "$TP_JOB_KEY" >"$pat"
grep -alF -f "$pat" /proc/[0-9]*/cmdline 2>/dev/null | sed 's/^/key on argv of /'
rm -f "$pat"
echo "to stderr $TP_RANK" >&2
EOF
chmod +x "$D/work/env.sh"
out=$(cd "$D/work" && TEST_Y=fwd in_ns a "$TPRUN" --ssh "$SSH" -n 3 -H a,b,c -x TEST_X=hello -x TEST_Y ./env.sh 2>&1)
st=$?
ok=1
for r in 0 1 2; do
    h=$(echo a b c | cut -d' ' -f$((r + 1)))
    echo "$out" | grep -qx "env $r host=$h node=$r local=0/1 x=hello y=fwd pwd=$D/work" || ok=0
    echo "$out" | grep -qx "to stderr $r" || ok=0
done
echo "$out" | grep -q "key on argv" && ok=0
[ $st = 0 ] && [ $ok = 1 ] && pass "remote environment, -x, working directory, output; no key on any argv" ||
    fail "remote environment: status $st: $out"
out=$(in_ns a "$TPRUN" --ssh "$SSH" -n 2 -H b,c --tag-output --wdir "$D" "$D/work/env.sh" 2>&1)
echo "$out" | grep -qx "\[1\] env 1 host=c node=1 local=0/1 x= y= pwd=$D" && pass "--wdir and --tag-output" ||
    fail "--wdir/--tag-output: $out"

# The foundation's and the collectives' multi-rank tests across hosts.
for hosts in "-n 4 -H a:2,b:2" "-n 6 -H a,b,c"; do
    step "runtime_rank boot and coll_check $hosts"
    out=$(tprun_on_a $hosts "$RANK_PROG" boot 2>&1) && pass "runtime_rank boot $hosts" ||
        fail "runtime_rank boot $hosts: $out"
    out=$(TP_PART_BYTES=64K tprun_on_a $hosts ./tests/coll_check 2>&1) &&
        pass "coll_check $hosts: $(echo "$out" | grep -m1 'coll_check:')" || fail "coll_check $hosts: $(echo "$out" | tail -5)"
done

# tprun's stdin reaches rank 0 on another host whole (a 5 MB file, a pipe, /dev/null); the other ranks get none;
# a rank 0 that stops reading does not keep tprun waiting on an endless input.
step "stdin to rank 0 on b: a 5 MB file, /dev/null, a pipe, an endless stream"
cat >"$D/work/stdin.sh" <<'EOF'
#!/bin/sh
if [ "$TP_RANK" = 0 ]; then echo "rank 0 on $TP_HOST read $(md5sum | cut -c1-32)"; else echo "rank $TP_RANK read $(wc -c | tr -d ' ') bytes"; fi
EOF
chmod +x "$D/work/stdin.sh"
head -c 5000000 /dev/urandom >"$D/big"
for input in "$D/big" /dev/null; do
    out=$(tprun_on_a -n 2 -H b,a "$D/work/stdin.sh" <"$input" 2>&1)
    st=$?
    [ $st = 0 ] && echo "$out" | grep -qx "rank 0 on b read $(md5sum <"$input" | cut -c1-32)" &&
        echo "$out" | grep -qx "rank 1 read 0 bytes" && pass "stdin from $input reaches rank 0 on b whole; rank 1 gets none" ||
        fail "stdin from $input: status $st: $out"
done
out=$(printf 'hello\nworld\n' | tprun_on_a -n 2 -H b,a "$D/work/stdin.sh" 2>&1)
[ $? = 0 ] && echo "$out" | grep -qx "rank 0 on b read $(printf 'hello\nworld\n' | md5sum | cut -c1-32)" &&
    pass "stdin from a pipe reaches rank 0 on b" || fail "stdin from a pipe: $out"
out=$(yes | timeout 30 ip netns exec "$NS_A" "$TPRUN" --ssh "$SSH" -n 2 -H b,a sh -c 'head -c 5 >/dev/null; echo done $TP_RANK' 2>&1)
st=$?
[ $st = 0 ] && [ "$(echo "$out" | grep -c '^done')" = 2 ] && pass "rank 0 stops reading an endless stdin: the job still ends (status 0)" ||
    fail "endless stdin: status $st: $out"

# Launches that cannot happen: each fails naming the host and ssh's own message, within the deadline.
launch_fails() { # NAME PATTERN ARGS...
    local name=$1 pattern=$2 t0 t1
    shift 2
    step "a launch that must fail: $name"
    t0=$(date +%s%N)
    out=$(TP_SSH_TIMEOUT=10 tprun_on_a "$@" 2>&1) # the default deadline; this case alone took 3.6-5.0 s here
    st=$?
    t1=$(date +%s%N)
    if [ $st = 125 ] && echo "$out" | grep -q "$pattern"; then
        pass "$name: status 125 in $(((t1 - t0) / 1000000)) ms: $(echo "$out" | grep -m1 '^tprun')"
    else
        fail "$name: status $st: $out"
    fi
    wait_no_leftovers 5 || fail "$name: left running: $(leftovers)"
}
launch_fails "unreachable host" '^tprun: host gone: the launch failed: .*198.18.1.99' -n 3 -H a,b,gone "$RANK_PROG" spin
launch_fails "refusing host" '^tprun: host refuses: the launch failed: .*Connection refused' \
    -n 2 -H a,refuses "$RANK_PROG" spin
cp "$RANK_PROG" "$NETNS_HIDDEN/prog"
launch_fails "host without the program" \
    "^tprun: host c: the launch failed: program \"$NETNS_HIDDEN/prog\": No such file or directory" \
    -n 3 -H a,b,c "$NETNS_HIDDEN/prog" spin
launch_fails "unknown host name" '^tprun: host nosuchhost: the launch failed: .*nosuchhost' \
    -n 2 -H a,nosuchhost "$RANK_PROG" spin
wait_no_leftovers 5 && pass "nothing left running on any host" || fail "left running: $(leftovers)"
finish
