#!/bin/bash
# An agent speaks only for the agents below it: a line tagged "c AGENT" for an agent it did not start (here,
# in a flat launch, any other agent) is refused with a warning naming the host, never taken as that agent's.
# The agents are stand-ins (this script as the ssh command): host x forges output for host y's rank 1.
set -u
if [ "${1:-}" = --fake-agent ]; then
    # Called as ssh: --fake-agent [ssh options] HOST REMOTE_COMMAND; tprun's plan arrives on stdin.
    host=
    for a in "$@"; do case $a in x | y) host=$a ;; esac; done
    echo "ready 127.0.0.1 1 127.0.0.1 0"
    while read -r l; do case $l in go*) break ;; esac; done
    if [ "$host" = x ]; then
        echo "s 0 $$"
        echo "c 1 o 1 FORGED by host x"
        echo "x 0 0 0 0"
    else
        echo "s 1 $$"
        echo "x 1 0 0 0"
    fi
    echo bye
    exit 0
fi
TPRUN=${TPRUN:-$PWD/tprun}
D=$(mktemp -d "${TMPDIR:-/tmp}/tree-forged.XXXXXX")
trap 'rm -rf "$D"' EXIT
"$TPRUN" --ssh "bash $(cd "$(dirname "$0")" && pwd)/$(basename "$0") --fake-agent" -n 2 -H x,y /bin/true \
    >"$D/out" 2>"$D/err"
st=$?
fails=0
[ "$st" = 0 ] || { echo "FAIL: tprun status $st: $(cat "$D/err")"; fails=1; }
grep -q FORGED "$D/out" && { echo "FAIL: a forged line was taken as rank 1's output: $(cat "$D/out")"; fails=1; }
grep -q '^tprun (.*) ssh: warning: host x: unexpected message from the agent: "c 1 o 1 FORGED by host x"$' "$D/err" ||
    { echo "FAIL: no warning naming host x: $(cat "$D/err")"; fails=1; }
[ "$fails" = 0 ] && echo "ok: host x's line for host y refused with a warning naming x"
exit "$fails"
