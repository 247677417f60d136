#!/bin/bash
# conformance.sh: every collective and send/recv case of tests/coll_check --conformance (every type, op and root, in
# place and out of place, sizes 0, 1, odd, around the part, a few MiB, on sub-communicators), bit for bit, at 2, 3, 4
# and 8 ranks, over every transport libtp registers (coll_check --transports lists them: a new transport is tested
# by registering it). Each run keeps only that transport (TP_TRANSPORTS) and must log every peer reached over it.
set -u
TPRUN=${TPRUN:-./tprun}
PROG=${PROG:-./tests/coll_check}
# CONFORMANCE_TIMEOUT_S bounds each run: a lost frame hangs a call rather than failing it.
# At debug level each rank logs the transport that reaches each peer (--report-bindings' per-peer detail).
export TP_PART_BYTES=64K TP_LOG_LEVEL=debug

names=$("$PROG" --transports) || { echo "FAIL: $PROG --transports: status $?"; exit 1; }
[ -n "$names" ] || { echo "FAIL: $PROG --transports lists no transport"; exit 1; }
fails=0
for name in $names; do
    for n in 2 3 4 8; do
        out=$(TP_TRANSPORTS=$name timeout -k 5 "${CONFORMANCE_TIMEOUT_S:-120}" "$TPRUN" -n "$n" "$PROG" --conformance 2>&1)
        rc=$?
        # Each rank names the transport that reaches each peer (n * (n - 1) lines).
        via=$(echo "$out" | grep -cE "^tp rank [0-9]+ \([^)]*\) iface: rank [0-9]+ \(host [^)]*\): $name, ")
        if [ "$rc" -ne 0 ] || ! echo "$out" | grep -q "^coll_check: $n ranks, .*: all match$"; then
            echo "FAIL: $name, $n ranks: status $rc"
            echo "$out" | grep -v 'cannot reduce\| iface: ' | tail -20
            fails=$((fails + 1))
        elif [ "$via" -ne $((n * (n - 1))) ]; then
            echo "FAIL: $name, $n ranks: $via of $((n * (n - 1))) peer links reported over $name:"
            echo "$out" | grep ' iface: ' | grep -v ": $name, " | head -5
            fails=$((fails + 1))
        else
            echo "ok: $name, $n ranks: every case matches, every peer reached over $name"
        fi
    done
done
# One shm run of coll_check --conformance at N ranks, for LABEL, with the extra environment ENV (VAR=value ...) and
# ARGS; sets out. Returns 1 (after saying why) when a case mismatches or the run fails.
shm_run() {
    local label=$1 n=$2 env=$3
    shift 3
    out=$(env $env TP_TRANSPORTS=shm timeout -k 5 "${CONFORMANCE_TIMEOUT_S:-120}" "$TPRUN" -n "$n" "$PROG" \
        --conformance "$@" 2>&1)
    local rc=$?
    if [ "$rc" -ne 0 ] || ! echo "$out" | grep -q "^coll_check: $n ranks, .*: all match$"; then
        echo "FAIL: shm with $label, $n ranks: status $rc"
        echo "$out" | grep -v 'cannot reduce\| iface: ' | tail -20
        fails=$((fails + 1))
        return 1
    fi
}
if echo "$names" | grep -qx shm; then
    # the single-copy path (the receiver reads large frames from the sender's buffer), where the kernel allows it
    for n in 2 3; do
        shm_run "CMA from 2 KiB" "$n" TP_SHM_CMA_BYTES=2K || continue
        if echo "$out" | grep -q "process_vm_readv of its memory refused"; then
            echo "ok: shm with CMA from 2 KiB, $n ranks: every case matches (CMA refused here: the ring carried them)"
        else
            echo "ok: shm with CMA from 2 KiB, $n ranks: every case matches"
        fi
    done
    # ring payloads written with streaming stores (TP_SHM_WRITE=streaming), and cached when set so; auto (the
    # default, which every other run here uses) changes way only on timed chunks, so its count is reported, not fixed
    for run in "2 streaming" "3 streaming" "4 streaming" "2 cached" "2 auto"; do
        read -r n way <<<"$run"
        shm_run "TP_SHM_WRITE=$way" "$n" "TP_SHM_WRITE=$way" || continue
        notes=$(echo "$out" | grep -c " shm: rank [0-9]*: ring payloads to it written with streaming stores$")
        streamed=$(echo "$out" | grep -c " shm: rank [0-9]*: [1-9][0-9]* ring frames written to it, [1-9][0-9]* chunks streaming,")
        closed=$(echo "$out" | grep -c " shm: rank [0-9]*: [1-9][0-9]* ring frames written to it, [0-9]* chunks streaming,")
        want=$((n * (n - 1)))
        [ "$way" = cached ] && want=0
        if [ "$way" = auto ]; then
            notes=0 want=0 streamed=$((closed == n * (n - 1) ? 0 : -1))
        fi
        if [ "$notes" -ne "$want" ] || [ "$streamed" -ne "$want" ] || [ "$closed" -ne $((n * (n - 1))) ]; then
            echo "FAIL: shm with TP_SHM_WRITE=$way, $n ranks: $notes notes and $streamed links streamed, not $want;" \
                "$closed of $((n * (n - 1))) links reported"
            echo "$out" | grep " ring \(payloads\|frames\)" | head -5
            fails=$((fails + 1))
        elif [ "$way" = auto ]; then
            echo "ok: shm with TP_SHM_WRITE=auto, $n ranks: every case matches;" \
                "$(echo "$out" | grep -o "[0-9]* chunks streaming, [0-9]* changes of way" | tr '\n' ';')"
        else
            echo "ok: shm with TP_SHM_WRITE=$way, $n ranks: every case matches, $streamed of $((n * (n - 1))) links" \
                "streamed"
        fi
    done
    # where ring frames that walk go (64 KiB, this run's part; 32 KiB ones of transfers of several parts): on through
    # the ring (walk) or back to its start; auto walks unless the ranks outnumber the CPUs they may run on (this
    # shell's, which every rank inherits)
    cpus=$(nproc)
    for run in "2 never 64K" "4 always 64K" "4 auto 64K" "2 auto 32K"; do
        read -r n walk part <<<"$run"
        shm_run "TP_SHM_RING_WALK=$walk, $part parts" "$n" "TP_SHM_RING_WALK=$walk TP_PART_BYTES=$part" || continue
        frames=" shm: rank [0-9]*: ring frames of 64 KiB and more, and those of transfers of several,"
        walked=$(echo "$out" | grep -c "$frames walk the ring$")
        back=$(echo "$out" | grep -c "$frames go back to its start when")
        # at close each link counts its frames that went back to the ring's start: of 64 KiB and more, and of
        # transfers of several frames
        went_back=$(echo "$out" | grep -c "back at the ring's start: \([1-9][0-9]* frames\|[0-9]* frames .*, [1-9][0-9]* of\)")
        want=$((n * (n - 1)))
        if [ "$walk" = never ] || { [ "$walk" = auto ] && [ "$n" -gt "$cpus" ]; }; then
            want=0
        fi
        if [ "$walked" -ne "$want" ] || [ "$back" -ne $((n * (n - 1) - want)) ]; then
            echo "FAIL: shm with TP_SHM_RING_WALK=$walk, $part parts, $n ranks on $cpus CPUs: $walked links walk and" \
                "$back go back, not $want and $((n * (n - 1) - want))"
            fails=$((fails + 1))
        elif { [ "$want" -gt 0 ] && [ "$went_back" -ne 0 ]; } || { [ "$want" -eq 0 ] && [ "$went_back" -eq 0 ]; }; then
            echo "FAIL: shm with TP_SHM_RING_WALK=$walk, $part parts, $n ranks on $cpus CPUs: $went_back links sent" \
                "frames back to the ring's start"
            echo "$out" | grep "back at the ring's start" | head -4
            fails=$((fails + 1))
        else
            echo "ok: shm with TP_SHM_RING_WALK=$walk, $part parts, $n ranks on $cpus CPUs: every case matches," \
                "$walked of $((n * (n - 1))) links walk the ring, $went_back sent frames back to its start"
        fi
    done
    # TP_SHM_CMA_BYTES=auto (the default) times exchanges (a send meeting a receive from the same peer, 256 KiB and
    # more) and sends the first two of each class by CMA, unless the ranks outnumber their CPUs
    for n in 2 4; do
        shm_run "TP_SHM_CMA_BYTES=auto" "$n" "TP_SHM_CMA_BYTES=auto" || continue
        timed=$(echo "$out" | grep -c " shm: rank [0-9]*: [1-9][0-9]* exchanges timed, [1-9][0-9]* of them by CMA$")
        any=$(echo "$out" | grep -c " exchanges timed, ")
        if echo "$out" | grep -q "process_vm_readv of its memory refused"; then
            echo "ok: shm with TP_SHM_CMA_BYTES=auto, $n ranks: every case matches (CMA refused here: $any links timed)"
        elif { [ "$n" -le "$cpus" ] && [ "$timed" -lt 2 ]; } || { [ "$n" -gt "$cpus" ] && [ "$any" -ne 0 ]; }; then
            echo "FAIL: shm with TP_SHM_CMA_BYTES=auto, $n ranks on $cpus CPUs: $timed links timed exchanges and" \
                "sent some by CMA, $any timed any"
            echo "$out" | grep " exchanges " | head -4
            fails=$((fails + 1))
        else
            echo "ok: shm with TP_SHM_CMA_BYTES=auto, $n ranks on $cpus CPUs: every case matches, $timed links sent" \
                "exchanges by CMA"
        fi
    done
    # 2-rank all_reduce and reduce_scatter of 512 KiB and more go streamed or lent (runtime/coll_pair_way.c). Both
    # ranks keep one schedule, so each class's calls, and its calls lent both ways, are the same at both ends at
    # close; the exploration lends (lent, lent, streamed, streamed, ...) unless CMA is off or refused. With 4 MiB
    # parts an in-place call's lent pieces land in scratch (with 64 KiB parts a slice outgrows it: the pieces come
    # through the transport's bounce)
    for run in "auto 64K" "0 64K" "auto 4M"; do
        read -r cma part <<<"$run"
        label="TP_SHM_CMA_BYTES=$cma, $part parts"
        shm_run "2-rank pair ways, $label" 2 "TP_SHM_CMA_BYTES=$cma TP_PART_BYTES=$part" || continue
        ways0=$(echo "$out" | grep " coll: rank 0: 2-rank " | sed 's/.* 2-rank /2-rank /' | sort)
        ways1=$(echo "$out" | grep " coll: rank 1: 2-rank " | sed 's/.* 2-rank /2-rank /' | sort)
        lent=$(echo "$ways0" | grep -o "[0-9]* lent" | awk '{s += $1} END {print s + 0}')
        refused=0
        echo "$out" | grep -q "process_vm_readv of its memory refused" && refused=1
        if [ -z "$ways0" ] || [ "$ways0" != "$ways1" ]; then
            echo "FAIL: shm 2-rank pair ways, $label: the ranks' classes differ or none was used:"
            diff <(echo "$ways0") <(echo "$ways1") | head -6
            fails=$((fails + 1))
        elif { [ "$cma" = auto ] && [ "$refused" = 0 ] && [ "$lent" -eq 0 ]; } ||
            { { [ "$cma" = 0 ] || [ "$refused" = 1 ]; } && [ "$lent" -ne 0 ]; }; then
            echo "FAIL: shm 2-rank pair ways, $label (CMA refused: $refused): $lent calls lent"
            echo "$ways0" | head -4
            fails=$((fails + 1))
        else
            echo "ok: shm 2-rank pair ways, $label: every case matches, $(echo "$ways0" | wc -l)" \
                "classes alike at both ranks, $lent calls lent"
        fi
    done
    # the mapped path: every buffer from tp_mem_alloc, read by the peer where it lies from 2 KiB on (one allocation
    # per call, so each peer maps, evicts and tells apart allocations whose fd numbers the sender reuses)
    for n in 2 3 4; do
        shm_run "buffers from tp_mem_alloc" "$n" TP_SHM_MAP_BYTES=2K --mem tp || continue
        maps=$(echo "$out" | grep -c " shm: rank [0-9]*: mapped its allocation ")
        if [ "$maps" -lt $((n * (n - 1))) ]; then
            echo "FAIL: shm with buffers from tp_mem_alloc, $n ranks: $maps allocations mapped, fewer than the peer links"
            fails=$((fails + 1))
        else
            echo "ok: shm with buffers from tp_mem_alloc, $n ranks: every case matches ($maps allocations mapped)"
        fi
    done
fi
[ "$fails" -eq 0 ]
