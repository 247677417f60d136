#!/bin/sh
# The agent channel under hostile input: the agent's plan reader (a plan followed by more than its buffer, a plan
# over the limit), tprun's reading of agent messages (numbers only within their line), and long output lines from
# a rank on another host (cut in marked pieces on the agent, like tprun's own). "ssh" here runs the command locally.
. "$(dirname "$0")/launcher_lib.sh"

FAKE_SSH="$(cd "$(dirname "$0")" && pwd)/fake_ssh.sh"

# A plan of 140 KB followed, in the same write, by 200 KB that is no command: once a heap overflow in read_plan.
plan() {
    printf 'hello tprun-agent 1\nhost h\nnode 0\nworld 1\njob j1\nkey k1\nprog /bin/true\nrank 0\narg true\narg '
    head -c 140000 /dev/zero | tr '\0' A
    printf '\nend \n'
}
{
    plan
    head -c 200000 /dev/zero | tr '\0' B
} >"$T/plan"
cat "$T/plan" | "$TPRUN" --agent >"$T/out" 2>"$T/err"
rc=$?
expect_eq "plan and 200 KB after it: status (the channel ended)" "$rc" 1
expect_eq "plan and 200 KB after it: the agent got ready" "$(head -c 6 "$T/out")" "ready "
grep -E 'AddressSanitizer|runtime error' "$T/err" && fail "plan and 200 KB after it: $(head -3 "$T/err")"
# Read at once from a file, the 200 KB after the plan are one read: held whole (then the agent refuses a channel
# it cannot watch, rather than wait forever).
"$TPRUN" --agent <"$T/plan" >"$T/out" 2>"$T/err"
expect_eq "plan and 200 KB in one read: status" "$?" 125
expect_eq "plan and 200 KB in one read: message" "$(cat "$T/out")" \
    "error cannot watch the channel from tprun on stdin: Operation not permitted"
# The same plan, then a command right behind it: it is read, not lost with the bytes around it.
{
    plan
    printf 'bogus-command\n'
} | "$TPRUN" --agent >"$T/out" 2>"$T/err"
grep -q 'unexpected command from tprun: "bogus-command"' "$T/err" || fail "the command after the plan: $(cat "$T/err")"

# A plan over 64 MiB without its end is refused with one message to tprun, not read forever.
{
    printf 'hello tprun-agent 1\narg '
    head -c 67200000 /dev/zero | tr '\0' A
} | "$TPRUN" --agent >"$T/out" 2>"$T/err"
rc=$?
expect_eq "plan over the limit: status" "$rc" 125
expect_eq "plan over the limit: message" "$(cat "$T/out")" \
    "error the plan from tprun is over 67108864 bytes without its end (too many arguments or -x values?)"

# An agent that sends crafted messages: a rank field is digits ended by a blank, within its own line.
cat >"$T/agent" <<SH
#!/bin/sh
while IFS= read -r l; do [ "\$l" = "end " ] && break; done
echo "ready 127.0.0.1 1 - 1"
IFS= read -r go
printf 's 0 %d\n' \$\$
cat "$T/lines"
printf 'x 0 0 0 0\nbye\n'
SH
chmod +x "$T/agent"
# crafted WHAT STDOUT: runs one rank through the crafted agent with $T/lines; checks the status and stdout.
crafted() {
    "$TPRUN" -n 1 -H fakehost --ssh "$T/agent" /bin/true >"$T/out" 2>"$T/err"
    expect_eq "$1: status" "$?" 0
    expect_eq "$1: stdout" "$(cat "$T/out")" "$2"
}
{
    printf 'o '
    head -c 65533 /dev/zero | tr '\0' ' '
    printf '\no \n0 hi\no 0\no 00 lead\no +0 plus\no 1 other\no 0 hello\ne 0 oops\n'
} >"$T/lines"
crafted "crafted messages" hello
expect_eq "crafted messages: stderr" "$(grep -c 'unexpected message from the agent' "$T/err")" 7
grep -q '^oops$' "$T/err" || fail "crafted messages: rank 0's stderr line is missing: $(cat "$T/err")"
grep -q 'unexpected message from the agent: "o  *\.\.\."$' "$T/err" || fail "crafted messages: the line of blanks"

# A message line over 64 MiB is dropped with one warning (tprun's memory stays bounded); the next one counts.
{
    printf 'o 0 '
    head -c 67200000 /dev/zero | tr '\0' y
    printf '\no 0 after\n'
} >"$T/lines"
crafted "a message over 64 MiB" after
expect_eq "a message over 64 MiB: warned" "$(grep -c 'a message line over 67108864 bytes was dropped' "$T/err")" 1

# A rank on another host prints a 200 KB line: the agent sends it in the pieces tprun writes for its own ranks.
"$TPRUN" -n 1 -H fakehost --ssh "$FAKE_SSH" sh -c 'head -c 200000 /dev/zero | tr "\0" x; echo; echo short' >"$T/out"
expect_eq "long line on another host: status" "$?" 0
expect_eq "long line on another host: pieces" "$(awk '{print length($0)}' "$T/out" | tr '\n' ' ')" \
    "65559 65559 65559 3392 5 "
expect_eq "long line on another host: marked" "$(grep -c '^x*\[tprun: line continues\]$' "$T/out")" 3
finish
