#!/bin/sh
# If tprun is SIGKILLed, its ranks and their process groups die (PDEATHSIG and the keeper); the keeper ends
# with a clean tprun, and its own death is not mistaken for a rank's.
. "$(dirname "$0")/launcher_lib.sh"

new_job_files
"$TPRUN" -n 3 "$RANKP" '0:keeper,child,pid,hang' '*:child,pid,hang' >"$out" 2>"$err" &
tp=$!
wait_for_lines "$out" 3 10 '^pid ' || fail "ranks did not start"
pids=$(sed -n 's/^pid //p' "$out")
kids=$(sed -n 's/^grandchild //p' "$out")
keeper=$(sed -n 's/^keeper //p' "$out")
[ -n "$keeper" ] && alive "$keeper" || fail "no keeper process found"
kill -KILL $tp
wait $tp 2>/dev/null # dash's wait prints "Killed" for it
expect_eq "tprun SIGKILLed" "$?" 137
wait_dead 5 $pids || fail "ranks survived tprun's SIGKILL"
wait_dead 5 $kids || fail "grandchildren survived tprun's SIGKILL"
wait_dead 5 $keeper || fail "the keeper survived"
grep -q '^tprun-keeper: tprun (pid [0-9]*) ended without finishing the job; killing 3 ranks' "$err" ||
    fail "keeper message: $(cat "$err")"

# A clean run: the keeper ends with tprun.
"$TPRUN" -n 2 "$RANKP" '0:keeper' >"$T/out" 2>"$T/err"
expect_eq "clean run status" "$?" 0
keeper=$(sed -n 's/^keeper //p' "$T/out")
[ -n "$keeper" ] || fail "no keeper in the clean run"
[ -n "$keeper" ] && alive "$keeper" && fail "the keeper outlived a clean tprun"

# The keeper killed under a running job: a warning, not a rank failure; the job still succeeds (its ranks end
# cleanly on the SIGTERM sent once tprun has warned; a rank that slept a while instead could end first).
new_job_files
"$TPRUN" -n 2 "$RANKP" '0:keeper,termok,pid,hang' '*:termok,pid,hang' >"$out" 2>"$err" &
tp=$!
wait_for_lines "$out" 2 10 '^pid ' || fail "ranks did not start"
kill -KILL "$(sed -n 's/^keeper //p' "$out")"
wait_for_lines "$err" 1 10 'keeper' || fail "keeper death not warned about"
kill -TERM $tp
wait $tp
expect_eq "keeper killed: status" "$?" 0
grep -q '^tprun: rank' "$err" && fail "keeper death reported as a rank's: $(cat "$err")"
# Without the keeper, the ranks themselves still die with tprun (PR_SET_PDEATHSIG).
new_job_files
"$TPRUN" -n 2 "$RANKP" '0:keeper,pid,hang' '*:pid,hang' >"$out" 2>"$err" &
tp=$!
wait_for_lines "$out" 2 10 '^pid ' || fail "ranks did not start"
pids=$(sed -n 's/^pid //p' "$out")
kill -KILL "$(sed -n 's/^keeper //p' "$out")"
wait_for_lines "$err" 1 10 'keeper' || fail "tprun did not notice the end of the keeper"
kill -KILL $tp
wait $tp 2>/dev/null # dash's wait prints "Killed" for it
wait_dead 5 $pids || fail "ranks survived the SIGKILL of tprun without the keeper"
finish
