#!/bin/sh
# --timeout (and TP_TIMEOUT) end the job with status 124 and name the ranks still running.
. "$(dirname "$0")/launcher_lib.sh"

"$TPRUN" -n 3 --timeout 0.5 "$RANKP" '0:exit=0' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "--timeout: status" "$?" 124
expect_eq "--timeout: first line" "$(first_tprun_line "$T/err")" \
    "tprun: timeout: the job ran longer than 0.5 s (--timeout); ranks still running: 1-2"
grep -q 'tprun: rank ' "$T/err" && fail "teardown victims reported as failures: $(cat "$T/err")"

# Ranks that ignore SIGTERM are killed after the grace, the status stays 124.
TP_TIMEOUT=0.3 "$TPRUN" -n 2 --grace 0.2 "$RANKP" '*:ignterm,hang' >"$T/out" 2>"$T/err"
expect_eq "TP_TIMEOUT with ignored SIGTERM: status" "$?" 124
first_tprun_line "$T/err" | grep -q 'ranks still running: 0-1$' || fail "TP_TIMEOUT line: $(cat "$T/err")"

# A job that ends in time is not affected.
"$TPRUN" -n 2 --timeout 10 "$RANKP" '*:exit=0'
expect_eq "in time: status" "$?" 0
finish
