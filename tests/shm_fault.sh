#!/bin/bash
# A peer that writes garbage into the shm segments (an impossible written or consumed position or cell count, a
# frame to be read by CMA at an address its sender does not map, from no known place, from a ring position it did
# not write, from a file of the sender's that is no tp_mem_alloc memory or from past the end of an allocation that
# is, a forged header in a cell, an impossible cell sequence word, random bytes over a whole segment): the victim's
# call fails with TP_ERR_PROTOCOL and no rank dies of a signal. A leader that writes its table of exchange ways
# itself: the follower goes those ways, and random words leave every value right. A lent half of a 2-rank all_reduce
# in memory its sender made unreadable: refused as the sender's protocol violation.
# A rank whose segment is of another libtp build's layout: refused by name, and the job ends.
# Every rank SIGKILLed mid-call: nothing is left in /dev/shm and no rank is left running.
set -u
TPRUN=${TPRUN:-./tprun}
PROG=./tests/shm_fault
export TP_TRANSPORTS=shm
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# what rank 0 must name: the check that caught each kind of garbage (fuzz: whichever sees it first)
declare -A why=([head]="shm: error: rank 1: its written position [0-9]* in shared memory is outside"
    [cma]="shm: error: rank 1: its frame names 16384 bytes at 0x8 in its memory, of which 0 can be read"
    [via]="shm: error: rank 1: its frame's payload is at an unknown place 7"
    [start]="shm: error: rank 1: its frame's ring position [0-9]* is neither [0-9]* nor [0-9]*: refused"
    [mapfd]="shm: error: rank 1: its frame names its fd [0-9]* as memory to read: not a sealed memfd"
    [mapoff]="shm: error: rank 1: its frame names 16384 bytes at offset 61440 of its memory (fd [0-9]*), which holds 65536"
    [cell]="coll: error: rank 1 sent a frame with a bad magic"
    [seq]="shm: error: rank 1: its cell sequence word [0-9]* in shared memory is outside"
    [tail]="shm: error: rank 1: its consumed position" [cells]="shm: error: rank 1: its consumed cell count"
    [fuzz]="")
for mode in head cma via start mapfd mapoff cell seq tail cells fuzz; do
    # tail: the ring path, where the garbage is read (cma: a receiver reads by CMA whatever its own setting)
    cma=64K
    case $mode in tail | cma | start) cma=0 ;; esac
    out=$(TP_SHM_CMA_BYTES=$cma TP_ERRORS=return timeout 30 "$TPRUN" -n 3 $PROG $mode 2>&1)
    if echo "$out" | grep -q "^rank 0: $mode: protocol violation by a peer: " && ! echo "$out" | grep -q "signal" &&
        echo "$out" | grep -q "^tp rank 0 ([^)]*) ${why[$mode]}"; then
        echo "ok: $mode: refused as a protocol violation, no rank died of a signal"
    else fail "$mode: not refused"; echo "$out" | tail -8; fi
done
# The pair's leader (rank 0) writes its table of ways in rank 1's segment itself. ways: CMA for exchanges 1-200 (the
# first twenty go two by two, CMA then the ring, and two in every 32 go the other way: 179 by CMA with the one before
# the loop), then the ring for 201-400 (6 pairs of probes by CMA), so rank 1 sends 191 by CMA. Rank 0 rewrites the
# words before a barrier that precedes each call; its own choices, made during a call, may still decide a call or so.
# waysfuzz: random words; any way is safe. Both: every value right on both ranks.
for mode in ways waysfuzz; do
    out=$(TP_LOG_LEVEL=debug TP_SHM_CMA_BYTES=auto TP_ERRORS=return timeout 60 "$TPRUN" -n 2 $PROG $mode 2>&1)
    st=$?
    by_cma=$(echo "$out" | sed -n 's/^tp rank 1 (.*) shm: rank 0: [0-9]* exchanges timed, \([0-9]*\) of them by CMA$/\1/p')
    if [ "$st" -ne 0 ] || [ "$(echo "$out" | grep -c "^rank [01]: $mode: 400 all_gathers of 1 MiB right$")" -ne 2 ]; then
        fail "$mode: status $st"
        echo "$out" | grep -v " iface: " | tail -8
    elif [ "$mode" = waysfuzz ]; then
        echo "ok: waysfuzz: random words in rank 1's table of ways: 400 all_gathers right on both ranks"
    elif echo "$out" | grep -q "process_vm_readv of its memory refused"; then
        echo "ok: ways: 400 all_gathers right (CMA refused here: the ways could not be seen)"
    elif [ -n "$by_cma" ] && [ "$by_cma" -ge 185 ] && [ "$by_cma" -le 197 ]; then
        echo "ok: ways: rank 1 went the ways rank 0's table said: $by_cma exchanges by CMA (191 planned), values right"
    else
        fail "ways: rank 1 sent ${by_cma:-no count of} exchanges by CMA, not about 191: it did not follow the table"
        echo "$out" | grep "exchanges" | head -4
    fi
done
# A 2-rank all_reduce whose lent half (the first call of its class goes lent) lies in memory its sender made
# unreadable: the receiver's read into its result is refused as the sender's protocol violation, naming the bytes.
out=$(TP_LOG_LEVEL=debug TP_ERRORS=return timeout 60 "$TPRUN" -n 2 $PROG land 2>&1)
st=$?
named="shm: error: rank 1: its frame names 524288 bytes at 0x[0-9a-f]* in its memory, of which 0 can be read"
if echo "$out" | grep -q "process_vm_readv of its memory refused"; then
    echo "ok: land: CMA refused here: nothing is lent (the case cannot arise)"
elif [ "$st" -eq 0 ] && echo "$out" | grep -q "^rank 0: land: protocol violation by a peer: " &&
    echo "$out" | grep -q "^tp rank 0 ([^)]*) $named" && ! echo "$out" | grep -q "signal"; then
    echo "ok: land: a lent half rank 0 cannot read refused as rank 1's protocol violation, no rank died of a signal"
else
    fail "land: status $st, not refused by name"
    echo "$out" | grep -v " iface: " | tail -8
fi
# A segment of another libtp build (rank 1 rewrites its own magic as the layout's before this one): rank 0's first
# call fails as rank 1's protocol violation, by name, and the job ends at once instead of rank 1 waiting for ever.
dir=$(mktemp -d)
out=$(SHM_FAULT_DIR=$dir TP_ERRORS=return timeout 30 "$TPRUN" -n 2 $PROG layout 2>&1)
st=$?
rm -rf "$dir"
layout="its segment header is another libtp build's layout and protocol (not tp-shm05)"
if [ "$st" -eq 0 ] && echo "$out" | grep -q "^rank 0: layout: protocol violation by a peer: .*$layout$" &&
    ! echo "$out" | grep -q "signal"; then
    echo "ok: layout: a segment of another build's layout refused as rank 1's protocol violation, the job ended"
else
    fail "layout: status $st, not refused by name"
    echo "$out" | grep -v " iface: " | tail -8
fi
before=$(ls -A /dev/shm | sort)
coproc JOB { exec "$TPRUN" -n 4 $PROG leak 2>&1; }
pids=""
while read -r -u "${JOB[0]}" line; do
    echo "$line" | grep -q "^rank [0-9]*: segment missing\|uses of /dev/shm" && echo "$line" | grep -v " 0 uses of /dev/shm$" &&
        fail "leak: $line"
    case $line in pids:*) pids=${line#pids:}; break ;; esac
done
[ -n "$pids" ] || fail "leak: the ranks never printed their pids"
# stopped first, so no rank hears of another's death and leaves by itself before its own SIGKILL
kill -STOP $pids
kill -KILL $pids
tprun_pid=$JOB_PID
wait "$tprun_pid"
st=$?
left=$(for p in $pids; do [ -d /proc/$p ] && echo "$p"; done)
after=$(ls -A /dev/shm | sort)
new=$(comm -13 <(echo "$before") <(echo "$after"))
if [ -z "$new" ] && [ -z "$left" ] && [ "$st" -ne 0 ]; then
    echo "ok: leak: every rank SIGKILLed mid-call (tprun status $st): nothing new in /dev/shm, no rank left"
else fail "leak: new in /dev/shm: \"$new\", ranks left: \"$left\", tprun status $st"; fi
[ "$fails" -eq 0 ]
