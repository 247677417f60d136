#!/bin/sh
# Output: whole lines only (several ranks writing long lines at once never mix), --tag-output prefixes in
# the same write, a last line without newline is completed, stdout and stderr stay apart; a line over 64 KiB
# goes in marked pieces, so tprun's memory stays bounded.
. "$(dirname "$0")/launcher_lib.sh"

# 4 ranks x 40 lines of 200 KiB, written in odd-sized pieces, checked line by line.
"$TPRUN" -n 4 "$RANKP" '*:lines=40:204800' >"$T/out" 2>"$T/err"
expect_eq "long lines: status" "$?" 0
"$RANKP" check-lines 4 40 204800 <"$T/out" && pass "4 ranks x 40 lines of 200 KiB, none mixed"  || fail "long lines mixed"
"$TPRUN" -n 4 "$RANKP" '*:lines=40:65537' | "$RANKP" check-lines 4 40 65537 && pass "64 KiB lines whole" ||
    fail "64 KiB lines mixed or cut"
expect_eq "64 KiB lines: not cut" "$("$TPRUN" -n 1 "$RANKP" '*:lines=3:65537' | grep -c 'continues')" 0
# Lines of several MiB.
"$TPRUN" -n 3 "$RANKP" '*:lines=2:3145728' | "$RANKP" check-lines 3 2 3145728 && pass "3 MiB lines whole" ||
    fail "3 MiB lines mixed"
# Many short lines through a pipe reader.
"$TPRUN" -n 4 "$RANKP" '*:lines=5000:64' | "$RANKP" check-lines 4 5000 64 && pass "short lines whole" ||
    fail "short lines mixed"

# --tag-output: "[r] " before each line, on both streams.
"$TPRUN" -n 3 --tag-output "$RANKP" '*:lines=50:1000,partial' >"$T/out" 2>"$T/err"
expect_eq "tag-output: status" "$?" 0
for r in 0 1 2; do
    expect_eq "tag-output rank $r whole lines" "$(grep -c "^\[$r\] $r:" "$T/out")" 50
    expect_eq "tag-output rank $r last line" "$(grep -c "^\[$r\] no newline\$" "$T/out")" 1
    expect_eq "tag-output rank $r stderr" "$(grep -c "^\[$r\] err line\$" "$T/err")" 1
done
expect_eq "tag-output: every stdout line tagged" "$(grep -vc '^\[[0-2]\] ' "$T/out")" 0
sed 's/^\[[0-9]*\] //' "$T/out" | grep -v 'no newline' >"$T/untagged"
"$RANKP" check-lines 3 50 1000 <"$T/untagged" || fail "tag-output lines mixed"

# A line over 64 KiB: pieces of 64 KiB, each marked, the bytes all kept; with --tag-output each piece tagged.
"$TPRUN" -n 1 sh -c 'head -c 200000 /dev/zero | tr "\0" x; echo; echo short' >"$T/out"
expect_eq "long line: pieces" "$(awk '{print length($0)}' "$T/out" | tr '\n' ' ')" "65559 65559 65559 3392 5 "
expect_eq "long line: marked pieces" "$(grep -c '^x*\[tprun: line continues\]$' "$T/out")" 3
expect_eq "long line: bytes kept" "$(sed 's/\[tprun: line continues\]$//' "$T/out" | head -4 | tr -d '\n' | wc -c)" 200000
"$TPRUN" -n 1 --tag-output sh -c 'head -c 140000 /dev/zero | tr "\0" x' >"$T/out"
expect_eq "long line, tagged" "$(awk '{print substr($0, 1, 5) length($0)}' "$T/out" | tr '\n' ' ')" \
    "[0] x65563 [0] x65563 [0] x8932 "
# 100 MB in one line: tprun's peak memory stays far below the line's size.
if [ -x /usr/bin/time ]; then
    /usr/bin/time -f '%M' -o "$T/rss" "$TPRUN" -n 1 sh -c 'head -c 100000000 /dev/zero | tr "\0" x' >/dev/null
    rss=$(tail -1 "$T/rss")
    [ "$rss" -lt 30000 ] && pass "a 100 MB line: tprun peaked at $rss KiB" || fail "a 100 MB line: tprun peaked at $rss KiB"
else
    echo "SKIP: /usr/bin/time is missing: tprun's memory for a 100 MB line is not measured"
fi

# A last line without newline gets one; stdout and stderr are not swapped or merged.
"$TPRUN" -n 2 "$RANKP" '*:partial' >"$T/out" 2>"$T/err"
expect_eq "partial: stdout" "$(cat "$T/out")" "no newline
no newline"
expect_eq "partial: stdout ends with a newline" "$(tail -c1 "$T/out" | od -An -c | tr -d ' ')" '\n'
expect_eq "partial: stderr" "$(cat "$T/err")" "err line
err line"
finish
