#!/bin/bash
# A misspelled TP_* variable is warned about once per job: by tprun, not again by its ranks; once by a rank that
# no tprun started; and tprun --info lists it.
. "$(dirname "$0")/runtime_lib.sh"
unset TP_ENV_CHECKED
warned() { grep -c "warning: unknown variables\? .*$2" "$1"; }

TP_NO_SUCH_SETTING=1 "$TPRUN" -n 3 "$RANK_PROG" boot >"$TEST_DIR/out" 2>"$TEST_DIR/err"
st=$?
[ $st = 0 ] || fail "tprun -n 3 with TP_NO_SUCH_SETTING: status $st: $(cat "$TEST_DIR/err")"
n=$(warned "$TEST_DIR/err" TP_NO_SUCH_SETTING)
[ "$n" = 1 ] && pass "tprun -n 3: one warning" || fail "tprun -n 3: $n warnings: $(cat "$TEST_DIR/err")"
grep -q '^tprun .*warning: unknown variable TP_NO_SUCH_SETTING ignored' "$TEST_DIR/err" ||
    fail "the warning is not tprun's: $(cat "$TEST_DIR/err")"

# Two names and a -x one: one line for the environment's, one for -x's.
TP_PART_BYTE=4M TP_NO_SUCH_SETTING=1 "$TPRUN" -n 2 -x TP_SPINUS=9 "$RANK_PROG" boot >"$TEST_DIR/out" 2>"$TEST_DIR/err"
n=$(grep -c warning "$TEST_DIR/err")
[ "$n" = 2 ] && [ "$(warned "$TEST_DIR/err" 'TP_PART_BYTE, TP_NO_SUCH_SETTING\|TP_NO_SUCH_SETTING, TP_PART_BYTE')" = 1 ] &&
    [ "$(warned "$TEST_DIR/err" TP_SPINUS)" = 1 ] && pass "two names in one warning, -x's in another" ||
    fail "two names and -x: $(cat "$TEST_DIR/err")"

# A rank without tprun (a singleton here) warns once itself.
TP_NO_SUCH_SETTING=1 "$RANK_PROG" boot >"$TEST_DIR/out" 2>"$TEST_DIR/err"
n=$(warned "$TEST_DIR/err" TP_NO_SUCH_SETTING)
[ "$n" = 1 ] && pass "a rank without tprun warns once" || fail "singleton: $n warnings: $(cat "$TEST_DIR/err")"

# Under tprun a rank sees TP_ENV_CHECKED=1; a bad value of it is refused like any other.
TP_ENV_CHECKED=maybe "$RANK_PROG" boot >"$TEST_DIR/out" 2>"$TEST_DIR/err"
st=$?
[ $st != 0 ] && grep -q 'TP_ENV_CHECKED: expected 1, 0, yes, no, true, false, on or off, got "maybe"' "$TEST_DIR/err" &&
    pass "TP_ENV_CHECKED=maybe refused" || fail "TP_ENV_CHECKED=maybe: status $st: $(cat "$TEST_DIR/err")"

TP_NO_SUCH_SETTING=1 "$TPRUN" --info >"$TEST_DIR/out" 2>"$TEST_DIR/err"
grep -qx 'unknown, set in this environment and ignored: TP_NO_SUCH_SETTING' "$TEST_DIR/out" &&
    pass "--info lists the unknown name" || fail "--info: $(tail -n 3 "$TEST_DIR/out")"
"$TPRUN" --info >"$TEST_DIR/out" 2>&1
grep -q '^unknown' "$TEST_DIR/out" && fail "--info lists unknown names when there are none"
finish
