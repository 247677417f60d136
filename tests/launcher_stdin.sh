#!/bin/sh
# stdin goes to rank 0 only: the fd itself when it is not a terminal, forwarded through a pipe when it is;
# the other ranks read /dev/null.
. "$(dirname "$0")/launcher_lib.sh"

printf 'hello\nworld\n' | "$TPRUN" -n 3 "$RANKP" '*:stdin' >"$T/out" 2>"$T/err"
expect_eq "pipe: status" "$?" 0
expect_eq "pipe: rank 0" "$(grep '^0 ' "$T/out")" "0 stdin bytes=12 path=pipe"
expect_eq "pipe: rank 1" "$(grep '^1 ' "$T/out")" "1 stdin bytes=0 path=/dev/null"
expect_eq "pipe: rank 2" "$(grep '^2 ' "$T/out")" "2 stdin bytes=0 path=/dev/null"

head -c 100000 /dev/zero >"$T/in"
"$TPRUN" -n 2 "$RANKP" '*:stdin' <"$T/in" >"$T/out" 2>"$T/err"
expect_eq "file: rank 0" "$(grep '^0 ' "$T/out")" "0 stdin bytes=100000 path=$T/in"
expect_eq "file: rank 1" "$(grep '^1 ' "$T/out")" "1 stdin bytes=0 path=/dev/null"

# A terminal: script(1) gives tprun a pty as stdin; tprun forwards it (a rank reading the tty itself would
# be stopped by SIGTTIN, as it is not in the terminal's foreground group).
if command -v script >/dev/null 2>&1; then
    printf 'abc\n\004' | script -qefc "$TPRUN -n 2 $RANKP '*:stdin'" /dev/null >"$T/out" 2>&1
    rc=$?
    expect_eq "tty: status" "$rc" 0
    tr -d '\r' <"$T/out" >"$T/clean"
    expect_eq "tty: rank 0" "$(grep '^0 stdin' "$T/clean")" "0 stdin bytes=4 path=pipe"
    expect_eq "tty: rank 1" "$(grep '^1 stdin' "$T/clean")" "1 stdin bytes=0 path=/dev/null"
else
    echo "script(1) not found: terminal case skipped"
fi
finish
