#!/bin/bash
# docs_engine.sh: every C block of docs/ENGINE.md compiles against tp.h and libtp, and its complete programs run
# under tprun (and by hand, torchrun-style, where the marker asks) and end with the status the marker gives.
LAUNCHER_TEST_TIMEOUT=${LAUNCHER_TEST_TIMEOUT:-280}
. "${srcdir:-.}/tests/launcher_lib.sh"

DOC=${ENGINE_DOC:-${srcdir:-.}/docs/ENGINE.md}
CC=${CC:-cc}
LIBTOOL="$builddir/libtool"
[ -x "$LIBTOOL" ] && [ -f "$builddir/libtp.la" ] || { echo "missing libtool or libtp.la in $builddir"; exit 99; }

# Splits the page into one C file per block and a manifest line per block: KIND NAME NP EXPECT BYHAND ALONE.
# Each block is preceded by "<!-- check: program NAME [np=N] [expect=S] [torchrun[=S0.S1...]] [singleton] -->",
# "<!-- check: fragment -->" (top-level code) or "<!-- check: body -->" (statements with tp_comm_t *world).
python3 - "$DOC" "$T" >"$T/manifest" <<'PY' || { fail "extracting the blocks of $DOC"; finish; }
import re, sys
doc, out = sys.argv[1], sys.argv[2]
lines = open(doc, encoding="utf-8").read().split("\n")
marker = re.compile(r"^<!-- check: (program|fragment|body)((?: [a-z_]+(?:=[0-9.]+)?)*) -->$")
n, names, bad = 0, set(), []
i = 0
while i < len(lines):
    if lines[i].strip().startswith("```c"):
        m = marker.match(lines[i - 1]) if i > 0 else None
        if not m:
            bad.append("line %d: a C block without a <!-- check: ... --> line before it" % (i + 1))
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if m:
            n += 1
            kind, words = m.group(1), m.group(2).split()
            opts = dict(w.split("=") for w in words if "=" in w)
            flags = [w for w in words if "=" not in w]
            np = int(opts.get("np", "2"))
            if "torchrun" in flags:
                flags.remove("torchrun")
                opts["torchrun"] = ".".join(["0"] * np)
            if len(opts.get("torchrun", "").split(".")) not in (1, np) or "torchrun" in opts and opts["torchrun"] == "":
                bad.append("line %d: torchrun= needs one status per rank" % i)
            name = "snippet%d" % n
            if kind == "program":
                if not flags or flags[0] == "singleton":
                    bad.append("line %d: a program needs a name" % i)
                    flags = ["?"]
                name, flags = flags[0], flags[1:]
            if name in names:
                bad.append("line %d: the name %s is used twice" % (i, name))
            names.add(name)
            open("%s/%s.body" % (out, name), "w").write("\n".join(lines[i + 1:j]) + "\n")
            print(kind, name, np, opts.get("expect", "0"), opts.get("torchrun", "-"),
                  "singleton" if "singleton" in flags else "-")
        i = j
    i += 1
for b in bad:
    print("BAD " + b)
if n == 0:
    print("BAD no C block found")
PY
if grep -q '^BAD ' "$T/manifest"; then
    grep '^BAD ' "$T/manifest" | sed "s|^BAD |$DOC: |" | while read -r l; do echo "FAIL: $l"; done
    fail "$DOC: every C block needs a check marker"
fi
grep -c '^program ' "$T/manifest" | grep -qv '^0$' || fail "$DOC: no complete program found"

# compile NAME: NAME.c into NAME, against the tree's tp.h and libtp, warnings as errors.
compile() {
    "$LIBTOOL" --silent --tag=CC --mode=link $CC -std=c11 -Wall -Wextra -Werror -Wno-unused-function \
        -I"${srcdir:-.}/include" -o "$T/$1" "$T/$1.c" "$builddir/libtp.la" -no-install >"$T/$1.cc.log" 2>&1
}

# run_torchrun NAME NP: the program started NP times by hand with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
# prints each rank's status, joined by dots.
run_torchrun() {
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    kids=
    for r in $(seq 0 $(($2 - 1))); do
        env -u TP_RANK -u TP_BOOT_ADDR RANK=$r WORLD_SIZE=$2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            timeout -k 5 60 "$T/$1" >"$T/$1.tr.$r.out" 2>&1 &
        kids="$kids $!"
    done
    sts=
    for k in $kids; do
        wait "$k"
        sts="$sts${sts:+.}$?"
    done
    kids=
    echo "$sts"
}

while read -r kind name np expect byhand alone; do
    [ "$kind" = BAD ] && continue
    {
        printf '#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <tp.h>\n\n'
        [ "$kind" = body ] && printf 'static void snippet(tp_comm_t *world)\n{\n'
        cat "$T/$name.body"
        [ "$kind" = body ] && printf '}\n\nint main(void)\n{\n    tp_comm_t *world;\n    if (tp_init(NULL, &world) != TP_OK) return 1;\n    snippet(world);\n    return tp_finalize(world) != TP_OK;\n}\n'
        [ "$kind" = fragment ] && printf '\nint main(void) { return 0; }\n'
    } >"$T/$name.c"
    [ "$kind" = program ] && cp "$T/$name.body" "$T/$name.c" # a program is compiled exactly as the page shows it
    if ! compile "$name"; then
        fail "$kind $name does not compile: $(head -c 2000 "$T/$name.cc.log")"
        continue
    fi
    pass "$kind $name compiles"
    [ "$kind" = fragment ] && continue
    timeout -k 5 60 "$TPRUN" -n "$np" "$T/$name" >"$T/$name.out" 2>"$T/$name.err"
    st=$?
    if [ "$st" = "$expect" ]; then
        pass "$name under tprun -n $np: status $st"
    else
        fail "$name under tprun -n $np: status $st, expected $expect: $(cat "$T/$name.out" "$T/$name.err")"
    fi
    if [ "$byhand" != - ]; then
        sts=$(run_torchrun "$name" "$np")
        if [ "$sts" = "$byhand" ]; then pass "$name torchrun-style, $np ranks: statuses $sts"; else
            fail "$name torchrun-style: statuses $sts, expected $byhand: $(cat "$T/$name".tr.*.out)"
        fi
    fi
    if [ "$alone" != - ]; then
        env -u TP_RANK timeout -k 5 60 "$T/$name" >"$T/$name.one" 2>&1
        st=$?
        if [ "$st" = 0 ]; then pass "$name alone (a world of one)"; else fail "$name alone: status $st: $(cat "$T/$name.one")"; fi
    fi
done <"$T/manifest"
finish
