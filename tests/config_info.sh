#!/bin/bash
# tprun links the registration list without the components' code, libtp with it: tprun --info must show the same
# components and variables, in the same order, as ENVIRONMENT.md's tables (tests/config_doc, which links libtp).
TPRUN=${TPRUN:-./tprun}
doc=$(./tests/config_doc) || { echo "FAIL: tests/config_doc: status $?"; exit 1; }
info=$("$TPRUN" --info) || { echo "FAIL: tprun --info: status $?"; exit 1; }
want=$(echo "$doc" | sed -n 's/^### \(.*\)$/section \1/p; s/^| `\(TP_[A-Z0-9_]*\)` .*/\1/p')
have=$(echo "$info" | sed -n 's/^\([a-z0-9_]*\( ([a-z]*)\)\{0,1\}\):$/section \1/p; s/^\(TP_[A-Z0-9_]*\) .*/\1/p')
sections=$(echo "$want" | grep -c '^section ')
if [ "$sections" -lt 2 ] || ! echo "$want" | grep -qx 'section core' || ! echo "$want" | grep -qx 'TP_KILL_GRACE'; then
    echo "FAIL: expected a core section and others in ENVIRONMENT.md's tables, got $sections sections:"
    echo "$doc"
    exit 1
fi
if [ "$want" != "$have" ]; then
    echo "FAIL: tprun --info's components and variables differ from libtp's (< libtp, > tprun):"
    diff <(echo "$want") <(echo "$have")
    exit 1
fi
echo "ok: tprun --info shows the $sections components' tables that libtp registers, $(echo "$want" | grep -c '^TP_') variables"
