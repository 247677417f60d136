#!/bin/bash
# Bootstrap: a singleton, torchrun-style ranks without a launcher, and ranks under tprun get a full table.
. "$(dirname "$0")/runtime_lib.sh"

out=$(timeout 10 "$RANK_PROG" boot 2>&1)
[ $? -eq 0 ] && echo "$out" | grep -q '^ready rank 0 of 1 .* local 0/1 node 0 job singleton-' &&
    pass "singleton" || fail "singleton: $out"

port=$(free_port)
torch_job 4 "$port" "$TEST_DIR/t" timeout 20 "$RANK_PROG" boot
for r in 0 1 2 3; do
    wait_status "${JOB_PIDS[$r]}"; st=$ST
    [ "$st" = 0 ] && grep -q "^ready rank $r of 4 pid [0-9]* local $r/4 node 0 job torch-127.0.0.1:$port" \
        "$TEST_DIR/t.$r.out" && pass "torchrun-style rank $r" || fail "torchrun-style rank $r: status $st: \
$(cat "$TEST_DIR/t.$r.out" "$TEST_DIR/t.$r.err")"
done

if [ -x "$TPRUN" ]; then
    for n in 1 4 16; do
        out=$(timeout 30 "$TPRUN" -n "$n" "$RANK_PROG" boot 2>&1)
        st=$?
        jobs_seen=$(echo "$out" | grep '^ready' | sed 's/.* job //' | sort -u | wc -l)
        [ $st -eq 0 ] && [ "$(echo "$out" | grep -c '^ready')" -eq "$n" ] && [ "$jobs_seen" -eq 1 ] &&
            pass "tprun -n $n" || fail "tprun -n $n: status $st: $out"
    done
    # --report-bindings on one host: rank 0's table has a row per rank; at debug level every rank names each peer
    # and how it is reached.
    for hosts in "" "-H localhost,127.0.0.1:2"; do
        out=$(TP_LOG_LEVEL=debug timeout 30 "$TPRUN" -n 3 $hosts --report-bindings "$RANK_PROG" boot 2>&1)
        st=$? ok=1
        [ "$(echo "$out" | grep -c '^tp rank 0 ([^)]*) bindings: [^ ]*  *[012]  *[012]  ')" = 3 ] &&
            [ "$(echo "$out" | grep -c '^tp rank [12] ([^)]*) bindings: ')" = 0 ] || ok=0
        for r in 0 1 2; do
            for p in 0 1 2; do
                [ $r = $p ] && continue
                [ "$(echo "$out" | grep -c "^tp rank $r ([^)]*) iface: rank $p (host [^)]*): tcp, the same host (over loopback 127.0.0.1)$")" = 1 ] || ok=0
            done
        done
        [ $st = 0 ] && [ $ok = 1 ] && pass "tprun -n 3 $hosts --report-bindings: a line per rank and peer" ||
            fail "tprun -n 3 $hosts --report-bindings: status $st: $out"
    done
    out=$(timeout 30 "$TPRUN" -n 4 ./examples/tp_hello 2>&1)
    [ $? -eq 0 ] && [ "$(echo "$out" | tail -n 1)" = "tp_hello: 4 ranks: bootstrap, settings agreement, rank table and collective finalize: PASS" ] &&
        pass "tp_hello under tprun" || fail "tp_hello: $out"
else
    echo "skip: no tprun built"
fi
finish
