#!/bin/sh
# Signals to tprun go to every rank's process group; what ignores them is SIGKILLed after the grace; a
# second SIGINT kills at once; a rank's process group (its grandchildren) dies with it.
. "$(dirname "$0")/launcher_lib.sh"
host=$(hostname)

# start_job ARGS...: tprun in the background with INT/TERM/HUP at their defaults (a script's background
# jobs ignore SIGINT, and tprun keeps what it finds ignored); waits until every rank printed "pid" (each rank
# prints it after its signal actions, so it is ready for the signal) into this job's own $out.
start_job() {
    np=$1
    shift
    new_job_files
    env --default-signal=INT,TERM,HUP "$TPRUN" -n "$np" "$@" >"$out" 2>"$err" &
    tp=$!
    wait_for_lines "$out" "$np" 10 '^pid ' || fail "ranks did not start: $(cat "$err")"
    pids=$(sed -n 's/^pid //p' "$out")
    kids=$(sed -n 's/^grandchild //p' "$out")
}

# SIGTERM forwarded: ranks die of it, status 143, the first line says so.
start_job 3 "$RANKP" '*:pid,hang'
kill -TERM $tp
wait $tp
expect_eq "SIGTERM: status" "$?" 143
first_tprun_line "$err" | grep -Eq "^tprun: rank [0-2] \(host $host, pid [0-9]+\) killed by signal 15 \(SIGTERM\), forwarded by tprun" ||
    fail "SIGTERM first line: $(cat "$err")"
wait_dead 2 $pids || fail "SIGTERM: ranks still alive"

# Ranks that end cleanly on SIGTERM: status 0.
start_job 2 "$RANKP" '*:termok,pid,hang'
kill -TERM $tp
wait $tp
expect_eq "SIGTERM handled by the ranks: status" "$?" 0

# SIGHUP and SIGINT are forwarded too.
start_job 2 "$RANKP" '*:pid,hang'
kill -HUP $tp
wait $tp
expect_eq "SIGHUP: status" "$?" 129
start_job 2 "$RANKP" '*:pid,hang'
kill -INT $tp
wait $tp
expect_eq "SIGINT: status" "$?" 130

# A rank that ignores SIGTERM is SIGKILLed after the grace.
start_job 2 --grace 0.3 "$RANKP" '0:termok,pid,hang' '1:ignterm,pid,hang'
kill -TERM $tp
wait $tp
expect_eq "ignored SIGTERM: status" "$?" 137
first_tprun_line "$err" | grep -Eq "^tprun: rank 1 .* killed by signal 9 \(SIGKILL\), sent by tprun after the grace period" ||
    fail "ignored SIGTERM first line: $(cat "$err")"

# A second SIGINT kills at once, even with a long grace.
start_job 2 --grace 30 "$RANKP" '*:ign=2,ignterm,pid,hang'
kill -INT $tp
wait_taken $tp 2 || fail "second SIGINT: tprun never took the first"
kill -INT $tp
wait $tp
expect_eq "second SIGINT: status" "$?" 137
wait_dead 2 $pids || fail "second SIGINT: ranks still alive"

# The process group: a rank's grandchild (which ignores SIGTERM) dies with the rank, on failure, teardown
# and on a clean exit.
start_job 3 "$RANKP" '0:child,pid,sleep=200,exit=3' '*:child,pid,hang'
wait $tp
expect_eq "group: status" "$?" 3
[ "$(echo $kids | wc -w)" = 3 ] || fail "group: expected 3 grandchildren, got '$kids'"
wait_dead 2 $pids $kids || fail "group: a rank or grandchild survived the failure"
start_job 2 "$RANKP" '*:child,pid,exit=0'
wait $tp
expect_eq "group, clean exit: status" "$?" 0
wait_dead 2 $kids || fail "group: a grandchild survived its rank's clean exit"
finish
