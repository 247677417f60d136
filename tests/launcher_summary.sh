#!/bin/bash
# launcher_summary.sh: tprun --json-summary FILE: one JSON object per job, parsed here with python3's json.
# Twelve jobs, two of them through an agent: more than the launcher tests' usual 60 s on a loaded machine.
LAUNCHER_TEST_TIMEOUT=${LAUNCHER_TEST_TIMEOUT:-120}
. "${srcdir:-.}/tests/launcher_lib.sh"

# expect_summary WHAT FILE PYTHON-EXPRESSIONS...: keeps a copy of FILE and the expressions (over d, the object);
# check_summaries then parses every copy with one python3 (a start per case is slow on a loaded machine).
cases=0
expect_summary() {
    cases=$((cases + 1))
    printf '%s\n' "$1" >"$T/case.$cases.what"
    cp "$2" "$T/case.$cases.json" 2>/dev/null || : >"$T/case.$cases.json"
    shift 2
    printf '%s\n' "$@" >"$T/case.$cases.checks"
}

# Each case: the file parses as JSON, its expressions hold, and the fields every summary has are there.
check_summaries() {
    python3 - "$T" "$cases" <<'PY'
import json, re, sys
out, n = sys.argv[1], int(sys.argv[2])
iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
base = ["isinstance(d['job_id'], str)", "isinstance(d['exit_status'], int)", "isinstance(d['argv'], list)",
        "d['np'] == len(d['ranks'])", "iso.match(d['start_time']) and iso.match(d['end_time'])",
        "d['start_time'] <= d['end_time']", "[r['rank'] for r in d['ranks']] == list(range(d['np']))",
        "all(r['start_time'] is None or (iso.match(r['start_time']) and iso.match(r['end_time'])"
        " and d['start_time'] <= r['start_time'] <= r['end_time'] <= d['end_time']) for r in d['ranks'])",
        "isinstance(d['messages'], list)"]
failed = 0
for k in range(1, n + 1):
    what = open("%s/case.%d.what" % (out, k)).read().strip()
    checks = [c for c in open("%s/case.%d.checks" % (out, k)).read().split("\n") if c]
    raw = open("%s/case.%d.json" % (out, k), "rb").read()
    try:
        d = json.loads(raw.decode("utf-8"))
        bad = [c for c in base + checks if not eval(c, {"d": d, "iso": iso})]
    except Exception as e:
        bad = ["parses as JSON: %s: %s" % (type(e).__name__, e)]
    if bad:
        failed += 1
        print("FAIL: %s" % what)
        for c in bad:
            print("  does not hold: " + c)
        print(raw.decode("utf-8", "replace"))
    else:
        print("ok: %s" % what)
sys.exit(min(failed, 100))
PY
    failures=$((failures + $?))
}

J="$T/summary.json"

# Success: every rank exited 0, no cause.
"$TPRUN" -n 3 --json-summary "$J" "$RANKP" '*:exit=0' >"$T/out" 2>"$T/err"
expect_eq "success: tprun's status" "$?" 0
expect_summary "success: the summary" "$J" "d['exit_status'] == 0" "d['first_failure'] is None" "d['cause'] is None" \
    "not d['timed_out'] and not d['launch_failed']" "d['argv'][1] == '*:exit=0'" "d['program'].endswith('/launcher_rank')" \
    "all(r['state'] == 'exited' and r['exit_code'] == 0 and r['status'] == 0 and r['signal'] is None for r in d['ranks'])" \
    "all(isinstance(r['pid'], int) and r['pid'] > 0 and not r['ended_by_tprun'] for r in d['ranks'])" \
    "all(r['cause'] == 'exited with status 0' for r in d['ranks'])" "d['job_id'] in d['messages'][-1] if d['messages'] else True"
expect_eq "success: no temporary file is left" "$(ls "$T" | grep -c 'summary.json.tmp')" 0

# One rank exits 3: it is the first failure, the others were ended by tprun.
"$TPRUN" -n 3 --json-summary "$J" "$RANKP" '1:exit=3' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "exit 3: tprun's status" "$?" 3
line=$(first_tprun_line "$T/err")
expect_summary "exit 3: the summary" "$J" "d['exit_status'] == 3" "d['first_failure'] == 1" \
    "'tprun: ' + d['cause'] == '''$line'''" "d['ranks'][1]['cause'] == 'exited with status 3'" \
    "d['ranks'][1]['exit_code'] == 3 and not d['ranks'][1]['ended_by_tprun']" \
    "all(d['ranks'][r]['ended_by_tprun'] and d['ranks'][r]['tprun_signal'] == 'SIGTERM' for r in (0, 2))" \
    "all(d['ranks'][r]['signal_name'] == 'SIGTERM' and d['ranks'][r]['status'] == 143 for r in (0, 2))" \
    "d['ranks'][0]['cause'] == 'killed by signal 15 (SIGTERM), sent by tprun to end the job'" \
    "d['messages'][-1].startswith('job ' + d['job_id'] + ': exit status 3')"

# SIGKILL: the killed rank's signal, status 137 and cause.
"$TPRUN" -n 2 --json-summary "$J" "$RANKP" '0:sig=9' '*:hang' >"$T/out" 2>"$T/err"
expect_eq "SIGKILL: tprun's status" "$?" 137
expect_summary "SIGKILL: the summary" "$J" "d['exit_status'] == 137" "d['first_failure'] == 0" \
    "d['ranks'][0]['state'] == 'killed' and d['ranks'][0]['signal'] == 9 and d['ranks'][0]['signal_name'] == 'SIGKILL'" \
    "d['ranks'][0]['status'] == 137 and d['ranks'][0]['exit_code'] is None" \
    "d['ranks'][0]['cause'] in ('killed by signal 9 (SIGKILL)', \"killed by the kernel's OOM killer (SIGKILL)\")" \
    "d['cause'].endswith(d['ranks'][0]['cause']) and 'pid %d' % d['ranks'][0]['pid'] in d['cause']"

# --timeout: status 124, the timeout line is the cause, every rank was ended by tprun.
"$TPRUN" -n 2 --timeout 0.3 --json-summary "$J" "$RANKP" '*:hang' >"$T/out" 2>"$T/err"
expect_eq "timeout: tprun's status" "$?" 124
expect_summary "timeout: the summary" "$J" "d['exit_status'] == 124 and d['timed_out']" "d['first_failure'] is None" \
    "d['cause'].startswith('timeout: the job ran longer than 0.3 s')" \
    "all(r['ended_by_tprun'] and r['status'] == 143 for r in d['ranks'])"

# Strings are escaped: a program whose name has a quote, arguments with a newline, control and non-UTF-8 bytes.
mkdir -p "$T/bin"
prog="$T/bin/say\"it"
printf '#!/bin/sh\nexit 0\n' >"$prog"
chmod +x "$prog"
arg=$(printf 'a"b\nc\\d\001\377\303\251')
"$TPRUN" -n 1 --json-summary "$J" "$prog" "$arg" >"$T/out" 2>"$T/err"
expect_eq "escaping: tprun's status" "$?" 0
expect_summary "escaping: the summary" "$J" "d['program'].endswith('/say\"it')" \
    "d['argv'][1] == 'a\"b\\nc\\\\d\\x01\\ufffd\\u00e9'"

# An existing FILE is replaced whole.
printf 'old content that is longer than nothing\n' >"$J"
"$TPRUN" -n 1 --json-summary="$J" "$RANKP" '*:exit=5' >"$T/out" 2>"$T/err"
expect_eq "replace: tprun's status" "$?" 5
expect_summary "replace: the old file is replaced" "$J" "d['exit_status'] == 5"

# A launch failure (the host's "ssh" fails): status 125, no rank started, the host's line is the cause.
"$TPRUN" -n 2 -H elsewhere:2 --ssh false --json-summary "$J" "$RANKP" >"$T/out" 2>"$T/err"
expect_eq "launch failure: tprun's status" "$?" 125
expect_summary "launch failure: the summary" "$J" "d['exit_status'] == 125 and d['launch_failed']" \
    "d['cause'].startswith('host elsewhere: the launch failed')" \
    "all(r['state'] == 'not started' and r['pid'] is None and r['host'] == 'elsewhere' for r in d['ranks'])"

# Remote ranks through an agent (an "ssh" that runs the agent on this machine): host is the name given.
"$TPRUN" -n 3 -H localhost:1,elsewhere:2 --ssh "$(cd "$(dirname "$0")" && pwd)/fake_ssh.sh" --json-summary "$J" "$RANKP" '2:exit=4' '*:hang' \
    >"$T/out" 2>"$T/err"
expect_eq "remote: tprun's status" "$?" 4
expect_summary "remote: the summary" "$J" "d['exit_status'] == 4 and d['first_failure'] == 2" \
    "[r['host'] for r in d['ranks']] == ['localhost', 'elsewhere', 'elsewhere']" \
    "d['ranks'][2]['exit_code'] == 4 and d['ranks'][2]['pid'] > 0" \
    "d['ranks'][1]['ended_by_tprun'] and d['ranks'][1]['start_time'] is not None"

# A bad FILE is refused before anything starts: exit 2, one line naming it, no file and no rank.
rm -f "$J"
refused() { # WHAT FILE WANT-IN-LINE
    "$TPRUN" -n 1 --json-summary "$2" "$RANKP" "*:touch=$T/started" >"$T/out" 2>"$T/err"
    st=$?
    if [ "$st" = 2 ] && [ "$(wc -l <"$T/err")" = 1 ] && grep -qF -- "$3" "$T/err"; then
        pass "refused: $1"
    else
        fail "refused: $1: status $st, stderr: $(cat "$T/err")"
    fi
}
refused "a missing directory" "$T/no/such/dir/s.json" "tprun: --json-summary $T/no/such/dir/s.json: cannot create a file in $T/no/such/dir: No such file or directory"
printf 'x' >"$T/plain"
refused "a file as a directory" "$T/plain/s.json" "cannot create a file in $T/plain: Not a directory"
refused "a directory" "$T" "tprun: --json-summary $T: is a directory (give a file name)"
refused "an empty name" "" "tprun: --json-summary: expected a file name, got \"\""
if [ "$(id -u)" != 0 ]; then
    mkdir "$T/ro" && chmod 555 "$T/ro"
    refused "a directory that is not writable" "$T/ro/s.json" "cannot create a file in $T/ro: Permission denied"
fi
# The Slurm launcher writes a summary too (tests/pmix_slurm.sh); outside an allocation it is refused as without one.
env -u SLURM_JOB_ID "$TPRUN" -n 1 --launcher slurm --json-summary "$J" "$RANKP" >"$T/out" 2>"$T/err"
expect_eq "refused: the Slurm launcher: status" "$?" 2
expect_eq "refused: the Slurm launcher: line" "$(cat "$T/err")" \
    "tprun: --launcher slurm: not inside a Slurm allocation (SLURM_JOB_ID is not set); run tprun under salloc or sbatch, or use --launcher local"
expect_eq "refused: nothing was written, no rank started" "$(ls "$T" | grep -c 'summary\|started')" 0

check_summaries
finish
