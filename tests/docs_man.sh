#!/bin/bash
# docs_man.sh: docs/tprun.1 names exactly the options of tprun --help, docs/tp.3 exactly the functions of tp.h,
# (each with its prototype), and groff renders both without a warning.
. "${srcdir:-.}/tests/launcher_lib.sh"

MAN1=${TPRUN_MAN:-${srcdir:-.}/docs/tprun.1}
MAN3=${TP_MAN:-${srcdir:-.}/docs/tp.3}
HEADER=${TP_HEADER:-${srcdir:-.}/include/tp.h}

"$TPRUN" --help >"$T/help" 2>&1 || fail "tprun --help: status $?"

# compare WHAT LEFT-NAME LEFT-FILE RIGHT-NAME RIGHT-FILE: each file holds one name a line; both sets must be equal.
compare() {
    sort -u "$3" >"$T/l" && sort -u "$5" >"$T/r"
    only_l=$(comm -23 "$T/l" "$T/r" | tr '\n' ' ')
    only_r=$(comm -13 "$T/l" "$T/r" | tr '\n' ' ')
    [ "$(wc -l <"$T/l")" -gt 3 ] || fail "$1: only $(wc -l <"$T/l") names found in $2"
    [ -z "$only_l" ] && pass "$1: everything in $2 is in $4" || fail "$1: in $2 but not in $4: $only_l"
    [ -z "$only_r" ] && pass "$1: everything in $4 is in $2" || fail "$1: in $4 but not in $2: $only_r"
}

python3 - "$T/help" "$MAN1" "$HEADER" "$MAN3" "$T" <<'PY' || fail "parsing the pages"
import re, sys
help_path, man1, header, man3, out = sys.argv[1:6]
opt = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")

def unroff(line):
    """Text of a troff line: font escapes dropped, \\- as -."""
    line = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace("\\(mu", "x")
    return re.sub(r"\\[(][a-z]{2}", "", line).replace("\\&", "")

# --help: the option column of each line that starts with blanks and a dash (descriptions are indented further).
helpopts = set()
for line in open(help_path):
    m = re.match(r"^ {2,6}(-.*?)(?: {2,}|$)", line.rstrip("\n"))
    if m:
        helpopts.update(opt.findall(m.group(1)) or (["--"] if m.group(1).strip() == "--" else []))
# tprun.1: the tag line after each .TP of the OPTIONS section.
manopts, section, after_tp = set(), "", False
for line in open(man1):
    line = line.rstrip("\n")
    if line.startswith(".SH"):
        section = line[3:].strip().strip('"')
    elif section == "OPTIONS" and line.startswith(".TP"):
        after_tp = True
    elif after_tp:
        after_tp = False
        text = unroff(line).strip()
        manopts.update(opt.findall(text) or (["--"] if text == "--" else []))
open(out + "/help.opts", "w").write("\n".join(sorted(helpopts)) + "\n")
open(out + "/man1.opts", "w").write("\n".join(sorted(manopts)) + "\n")

# tp.h: every function declared (comments dropped; a function pointer type is not a function).
code = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
funcs = set(re.findall(r"\b(tp_[a-z0-9_]+)\s*\(", code))
# tp.3: the prototypes, the .B/.BI lines between .nf and .fi (.BI alternates quoted pieces: join them back).
named, in_nf = set(), False
for line in open(man3):
    in_nf = (in_nf or line.startswith(".nf")) and not line.startswith(".fi")
    if in_nf and re.match(r"^\.BI? ", line):
        named.update(re.findall(r"\b(tp_[a-z0-9_]+)\s*\(", re.sub(r'"\s*', "", unroff(line))))
open(out + "/tp_h.funcs", "w").write("\n".join(sorted(funcs)) + "\n")
open(out + "/tp_3.funcs", "w").write("\n".join(sorted(named)) + "\n")
PY

compare "tprun options" "tprun --help" "$T/help.opts" "docs/tprun.1" "$T/man1.opts"
compare "libtp functions" "include/tp.h" "$T/tp_h.funcs" "docs/tp.3" "$T/tp_3.funcs"

# Rendering: groff's warnings (-ww) on stderr fail the test.
if command -v groff >/dev/null 2>&1; then
    for page in "$MAN1" "$MAN3"; do
        warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
        [ -z "$warn" ] && pass "groff renders $(basename "$page") without warnings" ||
            fail "groff warns about $page: $warn"
    done
else
    echo "SKIP: groff is not installed (scripts/install-deps.sh installs groff-base); the pages were not rendered"
    [ "$failures" -eq 0 ] && exit 77
fi
finish
