#!/bin/sh
# tprun refuses a bad command line or TP_* variable with one line and status 2, before starting anything.
. "$(dirname "$0")/launcher_lib.sh"

marker="$T/ran"
prog="$RANKP"
noexec="$T/noexec"
: >"$noexec"
chmod 644 "$noexec"
tracer=
tracer=$(command -v strace 2>/dev/null)
# LeakSanitizer cannot run under ptrace: a sanitizer build's traced tprun goes without leak checks.
[ -n "$tracer" ] && [ -n "${ASAN_OPTIONS:-}" ] && ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" && export ASAN_OPTIONS

# refused WANT ARGS...: tprun ARGS must print exactly WANT, exit 2, leave stdout empty and start nothing.
# with_env is VAR=value for tprun's environment (or empty).
with_env=
refused() {
    want=$1
    shift
    rm -f "$marker" "$T/trace"
    if [ -n "$tracer" ]; then
        env $with_env "$tracer" -f -qq -o "$T/trace" -e trace=process,socket,pipe,pipe2 "$TPRUN" "$@" >"$T/out" 2>"$T/err"
    else
        env $with_env "$TPRUN" "$@" >"$T/out" 2>"$T/err"
    fi
    rc=$?
    expect_eq "status of: tprun $*" "$rc" 2
    expect_eq "message of: tprun $*" "$(cat "$T/err")" "$want"
    [ -e "$marker" ] && fail "tprun $*: the program ran"
    [ -s "$T/out" ] && fail "tprun $*: wrote to stdout"
    if [ -n "$tracer" ]; then
        # One execve (tprun itself) and its exit; no fork, clone, socket or pipe.
        extra=$(grep -E '(clone|clone3|fork|vfork|socket|pipe|pipe2)\(' "$T/trace" | head -3)
        [ -n "$extra" ] && fail "tprun $*: took resources before refusing: $extra"
        [ "$(grep -c 'execve(' "$T/trace")" = 1 ] || fail "tprun $*: more than one execve"
    fi
}

run="0:touch=$marker *:touch=$marker"
refused 'tprun: -n: expected a positive integer (at most 65536), got "abc"' -n abc "$prog" $run
refused 'tprun: -n: expected a positive integer (at most 65536), got "0"' -n 0 "$prog" $run
refused 'tprun: -n: missing value (expected a positive integer)' -n
refused 'tprun: -n: missing (give the number of ranks, e.g. -n 4)' "$prog" $run
refused 'tprun: missing the program to run (usage: tprun -n N [options] [--] program [args])' -n 2 --
refused 'tprun: unknown option "--bogus" (tprun --help lists the options)' -n 2 --bogus "$prog" $run
refused 'tprun: --launcher: expected auto, local or slurm, got "foo"' -n 2 --launcher foo "$prog" $run
refused 'tprun: --map-by: expected slot or node, got "core"' -n 2 -H localhost,b --map-by core "$prog" $run
refused 'tprun: -n 4 needs 4 slots, but -H/--hostfile give only 2' -n 4 -H localhost:2 "$prog" $run
refused "tprun: --hostfile $T/none: No such file or directory" -n 2 --hostfile "$T/none" "$prog" $run
printf 'localhost slots=2\notherhost slots=2\n' >"$T/hosts"
refused 'tprun: --wdir: expected an absolute directory, got "rel"' -n 2 --hostfile "$T/hosts" --wdir rel "$prog" $run
refused "tprun: program \"$T/none\": No such file or directory" -n 2 "$T/none" $run
refused 'tprun: program "no-such-program-xyz": not found in PATH' -n 2 no-such-program-xyz
refused "tprun: program \"$noexec\": $noexec is not executable (Permission denied)" -n 2 "$noexec"
refused 'tprun: --timeout: expected a positive number of seconds, got "soon"' -n 2 --timeout soon "$prog" $run
refused 'tprun: --grace: expected a number of seconds (0 kills at once), got "x"' -n 2 --grace x "$prog" $run
refused 'tprun: -x: expected VAR or VAR=value with a variable name, got "1BAD=3"' -n 2 -x 1BAD=3 "$prog" $run
refused 'tprun: -x TP_JOB_KEY: tprun sets this variable for each rank; it cannot be overridden' -n 2 -x TP_JOB_KEY=0 "$prog" $run
refused 'tprun: -x TP_BOOT_TIMEOUT: expected a positive number of seconds, got "soon"' -n 2 -x TP_BOOT_TIMEOUT=soon "$prog" $run
with_env=TP_KILL_GRACE=abc refused 'tprun: TP_KILL_GRACE: expected a positive number of seconds, got "abc"' -n 2 "$prog" $run
with_env=TP_LAUNCHER=bar refused 'tprun: TP_LAUNCHER: expected auto, local or slurm, got "bar"' -n 2 "$prog" $run
with_env=TP_TORCH_ENV=maybe refused 'tprun: TP_TORCH_ENV: expected 1, 0, yes, no, true, false, on or off, got "maybe"' -n 2 "$prog" $run
# PATH is searched like execvp: a program found only through PATH runs, one missing from it does not.
with_env=PATH=$T refused 'tprun: program "launcher_rank": not found in PATH' -n 1 launcher_rank $run
with_env=

# What is not refused: help, version, info, an unknown TP_ variable (a warning) and a program from PATH.
"$TPRUN" --help >"$T/out" 2>&1
expect_eq "--help status" "$?" 0
grep -q '^usage: tprun -n N' "$T/out" || fail "--help prints the usage"
"$TPRUN" --version >"$T/out" 2>&1
expect_eq "--version status" "$?" 0
grep -q '^tprun [0-9]' "$T/out" || fail "--version prints the version"
"$TPRUN" --info >"$T/out" 2>&1
expect_eq "--info status" "$?" 0
grep -q '^TP_KILL_GRACE ' "$T/out" || fail "--info lists TP_KILL_GRACE"
rm -f "$marker"
TP_NO_SUCH_SETTING=1 PATH="$(cd "$(dirname "$RANKP")" && pwd):$PATH" "$TPRUN" -n 1 launcher_rank "0:touch=$marker" 2>"$T/err"
expect_eq "unknown TP_ variable: status" "$?" 0
grep -q 'warning: unknown variable TP_NO_SUCH_SETTING' "$T/err" || fail "unknown TP_ variable: no warning: $(cat "$T/err")"
[ -e "$marker" ] || fail "a program found through PATH did not run"
finish
