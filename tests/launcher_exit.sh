#!/bin/sh
# Exit statuses and the first line: 0 only when every rank exits 0; else the first failure's code or
# 128+signal, named in tprun's first line with rank, host, pid and cause.
. "$(dirname "$0")/launcher_lib.sh"
host=$(hostname)

# case_run NP RANK ACTION WANT_STATUS WANT_CAUSE: rank RANK prints its pid and does ACTION, the others hang.
case_run() {
    np=$1 r=$2 action=$3 want=$4 cause=$5
    "$TPRUN" -n "$np" "$RANKP" "$r:pid,$action" '*:hang' >"$T/out" 2>"$T/err"
    rc=$?
    pid=$(sed -n 's/^pid //p' "$T/out")
    expect_eq "-n $np rank $r $action: status" "$rc" "$want"
    expect_eq "-n $np rank $r $action: first line" "$(first_tprun_line "$T/err")" \
        "tprun: rank $r (host $host, pid $pid) $cause"
}

for np in 2 5 16; do
    r=$((np - 1))
    [ $np = 5 ] && r=2
    case_run $np $r exit=1 1 "exited with status 1"
    case_run $np $r exit=3 3 "exited with status 3"
    case_run $np $r exit=255 255 "exited with status 255"
    case_run $np $r sig=15 143 "killed by signal 15 (SIGTERM)"
    case_run $np $r sig=9 137 "killed by signal 9 (SIGKILL)"
    case_run $np $r sig=11 139 "killed by signal 11 (SIGSEGV)"
    case_run $np $r sig=6 134 "killed by signal 6 (SIGABRT)"
    case_run $np $r sig=2 130 "killed by signal 2 (SIGINT)"
done

# Success: every rank exits 0, nothing from tprun.
"$TPRUN" -n 8 "$RANKP" '*:exit=0' >"$T/out" 2>"$T/err"
expect_eq "all ranks exit 0" "$?" 0
[ -s "$T/err" ] && fail "tprun wrote on success: $(cat "$T/err")"

# A rank exiting 0 early is not a failure; the later failure decides.
"$TPRUN" -n 3 "$RANKP" '0:exit=0' '1:sleep=200,exit=4' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "early exit 0 then failure" "$?" 4
first_tprun_line "$T/err" | grep -q '^tprun: rank 1 .* exited with status 4$' || fail "early 0: $(cat "$T/err")"

# The first failure wins: rank 3 fails first; rank 1 ignores the teardown's SIGTERM and fails later with 5 (2 s in:
# after tprun's 0.25 s fate window and its SIGTERM even when the ranks start far apart under load; at 300 ms it
# sometimes exited before the SIGTERM and was not among the ranks tprun ended).
"$TPRUN" -n 4 --grace 5 "$RANKP" '3:exit=3' '1:ignterm,sleep=2000,exit=5' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "first failure wins: status" "$?" 3
first_tprun_line "$T/err" | grep -q '^tprun: rank 3 .* exited with status 3$' || fail "first failure: $(cat "$T/err")"
grep -q 'rank 1 .*status 5' "$T/err" && fail "a teardown victim was reported as a failure: $(cat "$T/err")"
expect_eq "one failure line" "$(grep -c '^tprun: rank ' "$T/err")" 1
tail -n1 "$T/err" | grep -q "exit status 3 (rank 3 failed first; tprun ended ranks 0-2)" || fail "summary: $(tail -n1 "$T/err")"

# A program that cannot be executed (checked as a program, fails in execve) ends with 127, named.
printf 'not a program\n' >"$T/script"
chmod +x "$T/script"
"$TPRUN" -n 2 "$T/script" >"$T/out" 2>"$T/err"
expect_eq "exec failure status" "$?" 127
first_tprun_line "$T/err" | grep -q "exited with status 127: execve $T/script: Exec format error" ||
    fail "exec failure line: $(cat "$T/err")"
# Causes before consequences: rank 1 is SIGKILLed, then rank 0 ends with TP_EXIT_PEER_FAILED (70) as libtp's
# fate path would; tprun is stopped meanwhile, so it finds both ended at once, and still names rank 1.
state() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }
wait_state() { i=0; while [ "$(state "$1")" != "$2" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done; }
# start_hanging: three hanging ranks (rank 0 exits 70 on SIGUSR1) in the background; tp, pids and p0..p2 set.
start_hanging() {
    new_job_files
    "$TPRUN" -n 3 --tag-output "$RANKP" '0:usr1exit=70,pid,hang' '*:pid,hang' >"$out" 2>"$err" &
    tp=$!
    wait_for_lines "$out" 3 10 'pid ' || fail "ranks did not start"
    pids=$(sed -n 's/^\[.\] pid //p' "$out")
    p0=$(sed -n 's/^\[0\] pid //p' "$out")
    p1=$(sed -n 's/^\[1\] pid //p' "$out")
    p2=$(sed -n 's/^\[2\] pid //p' "$out")
}
start_hanging
victim=$p1
kill -STOP $tp
wait_state $tp T
kill -KILL "$victim"
wait_state "$victim" Z
kill -USR1 "$p0"
wait_state "$p0" Z
kill -CONT $tp
wait $tp
expect_eq "cause before consequence: status" "$?" 137
first_tprun_line "$err" | grep -q "(host $host, pid $victim) killed by signal 9 (SIGKILL)\$" ||
    fail "cause before consequence: $(cat "$err")"

# A stopped rank is named as the cause when a peer ends with TP_EXIT_PEER_FAILED.
start_hanging
kill -STOP "$p2"
wait_state "$p2" T
kill -USR1 "$p0"
wait $tp
expect_eq "stopped rank: status" "$?" 70
first_tprun_line "$err" | grep -Eq "^tprun: rank [12] \(host $host, pid $p2\) stopped answering: it is stopped by signal 19 \(SIGSTOP\)$" ||
    fail "stopped rank first line: $(cat "$err")"
sed -n 2p "$err" | grep -q "^tprun: rank 0 .* exited with status 70 (TP_EXIT_PEER_FAILED" || fail "stopped rank second line: $(cat "$err")"
wait_dead 2 $pids || fail "stopped rank: a rank survived"
finish
