#!/bin/bash
# Interface choice across namespace hosts: a decoy nobody shares, TP_IFNAME's grammar, only one shared /24,
# none (the routed address, with a warning), and NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME to match.
. "$(dirname "$0")/netns_lib.sh"

# report NAME HOSTS [VAR=VALUE...]: tprun --report-bindings of two boot ranks, with the per-peer detail (debug level);
# the output in $out.
report() {
    local name=$1 hosts=$2
    shift 2
    step "--report-bindings -H $hosts: $name"
    out=$(env TP_LOG_LEVEL=debug "$@" ip netns exec "$NS_A" "$TPRUN" --ssh "$SSH" --report-bindings -n 2 -H "$hosts" \
        "$RANK_PROG" boot 2>&1)
    st=$?
    [ $st = 0 ] || fail "$name: status $st: $out"
}
# has NAME PATTERN...: every pattern is a line of $out.
has() {
    local name=$1 p ok=1
    shift
    for p in "$@"; do echo "$out" | grep -q -- "$p" || { fail "$name: no line /$p/ in: $out"; ok=0; }; done
    [ $ok = 1 ] && pass "$name"
}

report decoy a,b
has "a and b share mgmt0's /24 first; the decoy is named as shared by nobody" \
    'tp rank 1 (b:[0-9]*) iface: rank 0 (host a): mgmt0 198.18.1.2 -> 198.18.1.1 (a /24 both share' \
    'tp rank 0 (a:[0-9]*) iface: rank 1 (host b): mgmt0 198.18.1.1 <- 198.18.1.2' \
    'tp rank 0 (a:[0-9]*) iface: decoy0 198.18.101.1: not used: no peer has 198.18.101.0/24' \
    'tp rank 1 (b:[0-9]*) iface: rail0 198.18.2.2: not used: rank 0 shares 198.18.2.0/24' \
    'tp rank 1 (b:[0-9]*) iface: NCCL_SOCKET_IFNAME==mgmt0 GLOO_SOCKET_IFNAME=mgmt0'

report "TP_IFNAME=rail" a,b TP_IFNAME=rail
has "TP_IFNAME=rail (a prefix) picks rail0" 'iface: rank 0 (host a): rail0 198.18.2.2 -> 198.18.2.1' \
    'iface: mgmt0 198.18.1.2: not used: excluded by TP_IFNAME="rail"'
report "TP_IFNAME=^mgmt,rail0" a,b 'TP_IFNAME=^mgmt,rail0'
has "TP_IFNAME=^mgmt,rail0 (exclusions) picks rail1" 'iface: rank 0 (host a): rail1 198.18.3.2 -> 198.18.3.1' \
    'NCCL_SOCKET_IFNAME==rail1 GLOO_SOCKET_IFNAME=rail1'
report "TP_IFNAME==rail1" a,b 'TP_IFNAME==rail1'
has "TP_IFNAME==rail1 (exact)" 'iface: rank 0 (host a): rail1 198.18.3.2 -> 198.18.3.1'

# The connection itself runs where the report says: the TCP mesh between a and b on rail1.
step "a blocking job on rail1: where its TCP connection runs"
ip netns exec "$NS_A" env TP_IFNAME==rail1 "$TPRUN" --ssh "$SSH" -n 2 -H a,b "$RANK_PROG" block >"$D/blk.out" 2>&1 &
TP_PID=$!
TEST_PIDS+=($TP_PID)
for _ in $(seq 1 400); do [ "$(grep -c '^ready' "$D/blk.out")" -ge 2 ] && break; sleep 0.025; done
conns=$(in_ns b ss -tnH state established)
echo "$conns" | grep -q '198\.18\.3\.2:[0-9]* *198\.18\.3\.1:[0-9]*' && pass "the TCP connection runs on rail1" ||
    fail "no connection on rail1: $conns"
kill -TERM $TP_PID
wait $TP_PID
wait_no_leftovers 5 || fail "the rail1 job SIGTERMed: left running: $(leftovers)"

# a's rail0 cut off (its cable pulled: the veth leaves the bridge, the address stays up and published): b tries
# rail0 first for the bootstrap and for TCP, gets no answer, and uses the next /24 both share, rail1; both reports
# say so. TP_CONNECT=eager: on demand the boot-only ranks never connect, and the report names the address to dial.
ip link set "tp${ID}a0r" nomaster
report "rail0 dead" a,b TP_IFNAME=rail TP_CONNECT=eager
ip link set "tp${ID}a0r" master "tp${ID}r0"
has "a's rail0 dead: b falls back to rail1 (bootstrap and TCP), warns, and both ends report rail1" \
    "tp rank 1 (b:[0-9]*) boot: warning: rank 0's bootstrap at 198\.18\.2\.1:[0-9]* did not answer (.*); checked in at 198\.18\.3\.1:[0-9]*" \
    'tp rank 1 (b:[0-9]*) tcp: warning: rank 0: 198\.18\.2\.1:[0-9]* did not connect (.*); using 198\.18\.3\.1:[0-9]*' \
    'tp rank 1 (b:[0-9]*) iface: rank 0 (host a): rail1 198.18.3.2 -> 198.18.3.1 (a /24 both share' \
    'tp rank 0 (a:[0-9]*) iface: rank 1 (host b): rail1 198.18.3.1 <- 198.18.3.2 (a /24 both share' \
    'NCCL_SOCKET_IFNAME==rail1 GLOO_SOCKET_IFNAME=rail1'

report "one shared /24" a,c
has "a and c share only rail0's /24" 'iface: rank 0 (host a): rail0 198.18.2.3 -> 198.18.2.1 (a /24 both share' \
    'tp rank 1 (c:[0-9]*) iface: mgmt0 198.18.4.3: not used: no peer has 198.18.4.0/24' \
    'tp rank 1 (c:[0-9]*) iface: rail1 198.18.6.3: not used: no peer has 198.18.6.0/24'

report "no shared /24" a,c 'TP_IFNAME=^rail0'
has "no shared /24: the routed address, with a warning that says why" \
    'tp rank 1 (c:[0-9]*) iface: warning: rank 0 (host a): no /24 shared with it (this rank: mgmt0:198.18.4.3/24,rail1:198.18.6.3/24,decoy0:198.18.103.1/24; it: mgmt0:198.18.1.1/24,rail1:198.18.3.1/24,decoy0:198.18.101.1/24) (after TP_IFNAME); using the routed address 198.18.1.1' \
    'iface: rank 0 (host a): mgmt0 198.18.4.3 -> 198.18.1.1 (routed: no /24 shared'
finish
