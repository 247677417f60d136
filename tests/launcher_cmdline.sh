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
# with_env is VAR=value for tprun's environment (or empty); nofile, when set, is tprun's descriptor limit.
with_env=
nofile=
refused() {
    want=$1
    shift
    rm -f "$marker" "$T/trace"
    (
        [ -z "$nofile" ] || ulimit -n "$nofile" || exit 99
        if [ -n "$tracer" ]; then
            exec env $with_env "$tracer" -f -qq -o "$T/trace" -e trace=process,socket,pipe,pipe2 "$TPRUN" "$@"
        fi
        exec env $with_env "$TPRUN" "$@"
    ) >"$T/out" 2>"$T/err"
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
with_env=TP_TRANSPORTS=verbs refused 'tprun: TP_TRANSPORTS: unknown transport "verbs" in "verbs" (known: shm, tcp)' -n 2 "$prog" $run
refused 'tprun: -x TP_TRANSPORTS: unknown transport "verbs" in "tcp,^verbs" (known: shm, tcp)' -n 2 -x TP_TRANSPORTS=tcp,^verbs "$prog" $run
with_env=TP_PART_BYTES=8 refused 'tprun: TP_PART_BYTES: expected a byte count from 64 to 1G (a part holds at least one element), got "8"' -n 2 "$prog" $run
with_env=TP_SHM_WRITE=Streaming refused 'tprun: TP_SHM_WRITE: expected auto, cached or streaming, got "Streaming"' -n 2 "$prog" $run
with_env=TP_SHM_RING_WALK=yes refused 'tprun: TP_SHM_RING_WALK: expected auto, always or never, got "yes"' -n 2 "$prog" $run
with_env=TP_TORCH_ENV=maybe refused 'tprun: TP_TORCH_ENV: expected 1, 0, yes, no, true, false, on or off, got "maybe"' -n 2 "$prog" $run
refused "tprun: --wdir $T/none: No such file or directory" -n 2 --wdir "$T/none" "$prog" $run
refused "tprun: --wdir $noexec: not a directory" -n 2 --wdir "$noexec" "$prog" $run
# The Slurm launcher asked for outside an allocation: nothing starts (not even srun).
with_env="-u SLURM_JOB_ID" refused 'tprun: --launcher slurm: not inside a Slurm allocation (SLURM_JOB_ID is not set); run tprun under salloc or sbatch, or use --launcher local' -n 2 --launcher slurm "$prog" $run
with_env="-u SLURM_JOB_ID TP_LAUNCHER=slurm" refused 'tprun: TP_LAUNCHER=slurm: not inside a Slurm allocation (SLURM_JOB_ID is not set); run tprun under salloc or sbatch, or use --launcher local' -n 2 "$prog" $run
# PATH is searched like execvp: a program found only through PATH runs, one missing from it does not.
with_env=PATH=$T refused 'tprun: program "launcher_rank": not found in PATH' -n 1 launcher_rank $run
with_env=

# Hostile input: long hostfile lines, NUL bytes, control characters; each refusal stays one printable line.
{
    printf '# '
    head -c 5000 /dev/zero | tr '\0' c
    printf 'evilhost\n'
} >"$T/hosts"
refused "tprun: --hostfile $T/hosts: no hosts in the file" -n 1 --hostfile "$T/hosts" --ssh "$prog" "$prog" $run
printf 'localhost\0garbage slots=99999\n' >"$T/hosts"
refused "tprun: --hostfile $T/hosts: line 1: a NUL byte (a hostfile is text)" -n 1 --hostfile "$T/hosts" "$prog" $run
refused 'tprun: -H: expected a host name (letters, digits, '"'-', '.', '_', '@'"', at most 255), got "a\x1b[31m\x0ab"' \
    -n 1 -H "$(printf 'a\033[31m\nb')" "$prog" $run
refused 'tprun: -H: host "localhost": expected a positive slot count, got "0000000000000000000000000000001junk"' \
    -n 1 -H localhost:0000000000000000000000000000001junk "$prog" $run
refused 'tprun: unknown option "--a\x0a\x1b]0;title\x07" (tprun --help lists the options)' \
    -n 1 "$(printf -- '--a\n\033]0;title\007')" "$prog" $run
# More ranks than the descriptor limit lets tprun hold pipes for: refused before the first pipe.
nofile=100 refused 'tprun: -n 64: 64 ranks here need 192 file descriptors, but the limit is 100 (raise ulimit -n, or run fewer ranks on this host)' \
    -n 64 "$prog" $run
nofile=

# What is not refused: help, version, info, an unknown TP_ variable (a warning) and a program from PATH.
"$TPRUN" --help >"$T/out" 2>&1
expect_eq "--help status" "$?" 0
grep -q '^usage: tprun -n N' "$T/out" || fail "--help prints the usage"
for code in 124 125 127 2 128+signal; do
    tr '\n' ' ' <"$T/out" | grep -q "[ ;]$code[ ;)]" || fail "--help's exit statuses omit $code: $(grep -A6 '^Exit status' "$T/out")"
done
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

# srun missing inside an allocation: one line, status 125, nothing started.
rm -f "$marker"
SLURM_JOB_ID=1 TP_LAUNCHER=auto PATH="$T" "$TPRUN" -n 2 "$prog" $run >"$T/out" 2>"$T/err"
expect_eq "srun not in PATH: status" "$?" 125
expect_eq "srun not in PATH: message" "$(cat "$T/err")" \
    'tprun: Slurm allocation 1: cannot start srun: program "srun": not found in PATH (set TP_LAUNCHER=local to start the ranks here)'
[ -e "$marker" ] && fail "srun not in PATH: the program ran"

# --wdir applies to the ranks on this machine; a relative program path still names tprun's file (no GPU per rank: the
# test runs on GPU hosts with fewer GPUs than ranks too).
mkdir "$T/wd"
"$TPRUN" -n 2 --gpus-per-rank 0 --wdir "$T/wd" "$prog" '*:touch=here' >"$T/out" 2>"$T/err"
expect_eq "--wdir for local ranks: status" "$?" 0
[ -e "$T/wd/here" ] && pass "--wdir: local ranks start in it" || fail "--wdir: local ranks did not start in $T/wd: $(cat "$T/err")"
finish
