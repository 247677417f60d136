#!/bin/sh
# tp-bench's options: --help is usage on stdout and exit 0; a bad option or value is one line naming it and exit 2;
# the table's header and rows say how many calls --iters asked for; examples/bench/tcp_bench.sh refuses bad settings;
# ab_bench refuses its own and, with Open MPI at hand, one --same-process round gives libtp's, Open MPI's and the bare
# socket's rows.
. "$(dirname "$0")/launcher_lib.sh"
BENCH="$builddir/tp-bench"
[ -x "$BENCH" ] || { echo "missing $BENCH (run from the build directory)"; exit 99; }

"$BENCH" --help >"$T/out" 2>"$T/err"
expect_eq "--help status" "$?" 0
grep -q '^usage: tp-bench ' "$T/out" || fail "--help: no usage on stdout: $(head -n 2 "$T/out")"
[ -s "$T/err" ] && fail "--help wrote to stderr: $(cat "$T/err")"

bad() { # bad ARGS... -- the one-line message expected on stderr
    want=$(eval "echo \"\${$#}\"")
    args=
    while [ $# -gt 1 ]; do args="$args $1"; shift; done
    # shellcheck disable=SC2086
    "$BENCH" $args >"$T/out" 2>"$T/err"
    st=$?
    expect_eq "tp-bench$args: status" "$st" 2
    expect_eq "tp-bench$args: message" "$(cat "$T/err")" "$want"
    [ -s "$T/out" ] && fail "tp-bench$args wrote to stdout: $(cat "$T/out")"
}
bad --iters 0 'tp-bench: --iters: expected an integer from 1 to 500, got "0"'
bad --iters 501 'tp-bench: --iters: expected an integer from 1 to 500, got "501"'
bad --iters 'tp-bench: --iters: needs a value (--help lists the options)'
bad --max-bytes 4M 'tp-bench: --max-bytes: expected a byte count from 16 to 1073741824, got "4M"'
bad --ops allreduce,all_reduce 'tp-bench: --ops: expected a comma-separated list of allreduce, allgather, reduce_scatter, bcast, sendrecv, alltoall, got "allreduce,all_reduce"'
bad --bogus 'tp-bench: unknown option "--bogus" (--help lists the options)'
for v in 1048576,x 15 1048576,,16 , 1073741825; do
    bad --sizes "$v" "tp-bench: --sizes: expected up to 32 comma-separated byte counts from 16 to 1073741824, got \"$v\""
done

"$TPRUN" -n 2 "$BENCH" --ops bcast --max-bytes 64 --iters 3 >"$T/out" 2>"$T/err"
expect_eq "tprun -n 2 tp-bench --iters 3: status" "$?" 0
grep -q '^tp-bench: 2 ranks, .*back-to-back calls (3 per size)' "$T/out" ||
    fail "the header does not say 3 calls per size: $(head -n 1 "$T/out")"
rows=$(grep -c '^bcast  *[0-9][0-9]*  *3 ' "$T/out")
expect_eq "rows of bcast with 3 calls (16 and 64 bytes)" "$rows" 2

# --no-barrier: one barrier per size, each row the slowest rank's mean per call, so p50 = p90; the JSON rows count the
# context switches per call (the mean over ranks: a number, zero or more)
"$TPRUN" -n 2 "$BENCH" --ops allreduce --sizes 16,4096 --iters 20 --no-barrier >"$T/out" 2>"$T/err"
expect_eq "tprun -n 2 tp-bench --no-barrier: status" "$?" 0
grep -q '^tp-bench: 2 ranks, .*the slowest rank.s mean over back-to-back calls (20 per size), after one barrier$' \
    "$T/out" || fail "--no-barrier: the header does not say so: $(head -n 1 "$T/out")"
expect_eq "--no-barrier rows whose p50 is their p90" "$(awk '$1 == "allreduce" && $4 == $5' "$T/out" | wc -l)" 2
"$TPRUN" -n 2 "$BENCH" --ops allreduce --sizes 16,4096 --iters 20 --no-barrier --json >"$T/out" 2>"$T/err"
expect_eq "tprun -n 2 tp-bench --no-barrier --json: status" "$?" 0
expect_eq "--no-barrier --json rows with p50 = p90 and a switch count" \
    "$(grep -c '"p50_us":\([0-9.]*\),"p90_us":\1,.*"switches":[0-9][0-9]*\.[0-9][0-9]}$' "$T/out")" 2

# --sizes runs exactly those sizes in that order, whatever --max-bytes says before it
"$TPRUN" -n 2 "$BENCH" --ops allgather --max-bytes 16 --sizes 96,24 --iters 2 --json >"$T/out" 2>"$T/err"
expect_eq "tprun -n 2 tp-bench --sizes 96,24: status" "$?" 0
expect_eq "--sizes 96,24: sizes run" "$(sed -n 's/.*"bytes":\([0-9]*\).*/\1/p' "$T/out" | paste -sd, -)" "96,24"

# examples/bench/tcp_bench.sh refuses a bad setting by name before it builds or runs anything
TCPB="$(cd "$(dirname "$0")/.." && pwd)/examples/bench/tcp_bench.sh"
for case in "--transport udp|--transport: expected tcp or shm, got \"udp\"" \
    "--rounds 0|--rounds: expected a positive integer, got \"0\"" \
    "--variant x|--variant: expected NAME=SETTINGS, got \"x\"" \
    "--stat p99|--stat: expected p50, p10, p90 or min, got \"p99\"" \
    "--same-process --variant a=X=1|--variant does not apply with --same-process (one libtp a process)"; do
    args=${case%%|*} want="tcp_bench.sh: ${case#*|}"
    # shellcheck disable=SC2086
    bash "$TCPB" $args >"$T/out" 2>"$T/err"
    expect_eq "tcp_bench.sh $args: status" "$?" 1
    expect_eq "tcp_bench.sh $args: message" "$(cat "$T/err")" "$want"
done
(cd "$T" && bash "$TCPB" --same-process >"$T/out" 2>"$T/err")
expect_eq "tcp_bench.sh --same-process away from a build: status" "$?" 1
expect_eq "tcp_bench.sh --same-process away from a build: message" "$(cat "$T/err")" \
    "tcp_bench.sh: --same-process: no ./.libs/libtp.so here: run it from the build directory"

# ab_bench (libtp and Open MPI in one job): its own options refused by name, then one short round of
# tcp_bench.sh --same-process with each implementation's rows, the bare socket's among them
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null && [ -e "$builddir/.libs/libtp.so" ]; then
    AB="$T/ab_bench" src=$(cd "${srcdir:-.}" && pwd)
    sh "$src/examples/bench/ab_build.sh" "$builddir/.libs" "$AB" 2>"$T/err" ||
        fail "mpicc.openmpi cannot build ab_bench.c: $(head -n 3 "$T/err")"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # a singleton MPI_Init, as root in CI
    for case in "--block 0|--block: expected 1 to 500, got \"0\"" "--block|--block needs a value" \
        "--floor|--floor: needs 2 ranks, not 1" "--bogus|unknown option \"--bogus\" (--help lists the options)"; do
        args=${case%%|*} want="ab_bench: ${case#*|}"
        # shellcheck disable=SC2086
        "$AB" $args >"$T/out" 2>"$T/err"
        expect_eq "ab_bench $args: status" "$?" 2
        expect_eq "ab_bench $args: message" "$(cat "$T/err")" "$want"
    done
    (cd "$builddir" && TP_TRANSPORTS= bash "$TCPB" --same-process --rounds 1 --sizes 16,4096 --ops allreduce,allgather \
        --iters 3 --json "$T/rows.jsonl" >"$T/out" 2>"$T/err")
    st=$?
    [ "$st" = 0 ] || echo "tcp_bench.sh --same-process said: $(tail -n 40 "$T/err")"
    expect_eq "tcp_bench.sh --same-process, one round: status" "$st" 0
    # the bare sockets' rows: every exchange up to 256 B; above, all_gather (two sockets), not all_reduce
    for row in tcp:allreduce:16:1 ompi-tcp:allreduce:16:1 tcp-floor:allreduce:16:1 tcp-floor:allreduce:4096:0 \
        tcp:allgather:4096:1 ompi-tcp:allgather:4096:1 tcp-floor:allgather:4096:1; do
        impl=${row%%:*} rest=${row#*:}
        op=${rest%%:*} rest=${rest#*:}
        bytes=${rest%%:*} want=${rest#*:}
        expect_eq "tcp_bench.sh --same-process: rows of $impl, $op of $bytes B" \
            "$(grep -c "\"impl\":\"$impl\",.*\"op\":\"$op\",\"bytes\":$bytes,\"iters\":3," "$T/rows.jsonl")" "$want"
    done
else
    echo "ab_bench not checked: no mpicc.openmpi, mpirun.openmpi or $builddir/.libs/libtp.so"
fi
finish
