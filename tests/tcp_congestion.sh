#!/bin/sh
# The TCP transport's data connections use reno, not the kernel's default (bbr here paces loopback sends and keeps a
# small window: docs/BENCHMARKS.md, "TCP large messages"). Skipped where the default is reno already.
. "$(dirname "$0")/launcher_lib.sh"
PROG="$builddir/tests/tcp_congestion"
[ -x "$PROG" ] || { echo "missing $PROG (run from the build directory)"; exit 99; }
def=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null)
[ -n "$def" ] || { echo "SKIP: /proc/sys/net/ipv4/tcp_congestion_control unreadable"; exit 77; }
[ "$def" = reno ] && { echo "SKIP: the kernel's default is reno already: the test could not fail"; exit 77; }
# the program tells data connections by their 8 MiB buffers: 4 MiB asked for, doubled, and over autotuning's limit
for f in /proc/sys/net/core/rmem_max /proc/sys/net/core/wmem_max /proc/sys/net/ipv4/tcp_wmem; do
    [ "$(awk '{ print $NF }' "$f" 2>/dev/null)" -ge 4194304 ] 2>/dev/null || { echo "SKIP: $f is not 4 MiB or more"; exit 77; }
done
[ "$(awk '{ print $NF }' /proc/sys/net/ipv4/tcp_wmem)" -le 4194304 ] || { echo "SKIP: tcp_wmem's limit is over 4 MiB"; exit 77; }
TP_TRANSPORTS=tcp "$TPRUN" -n 2 "$PROG" >"$T/out" 2>"$T/err"
expect_eq "tprun -n 2 tcp_congestion: status" "$?" 0
# two data connections per pair and one end of each in each rank: four sockets in all, every one reno
expect_eq "data connections with reno (default here: $def)" "$(grep -c ' reno$' "$T/out")" 4
expect_eq "data connections with anything else" "$(grep -vc ' reno$' "$T/out")" 0
finish
