#!/bin/bash
# RoCE HCA choice on replayed machines (tests/topo_lib.sh): hosts are agents on this machine (tests/fake_ssh.sh),
# each rank reading its host's fake sysfs. Every case checks what each rank exports for NCCL and rank 0's report.
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/topo_lib.sh"
seed_pair

# Seed 001: a takes the two ports cabled to b (not the first two active ones), b the same rails; a's GPU sits behind
# domain 2, so roceP2p1s0f1 comes first there; b has no GPU: scan order.
job "seed 001 pair" a,b -n 2
has "a and b pick the rails they share" \
    "rank 0 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3"
table "seed 001 report" \
    "host rank local cpus numa gpu hca ports tcp to rank 0" \
    "a 0 0 $CPUS - 0002:02:00.0 roceP2p1s0f1:1 10.2.1.1 gid 3, rocep1s0f1:1 10.1.1.1 gid 3 -" \
    "why: rank 0: cpus: no GPU or HCA to bind near: not bound; hca: on a /24 its peers on other hosts also list, nearest the GPU 0002:02:00.0 first; not used: roceP2p1s0f0:1 not active (state 1: DOWN); not used: rocep1s0f0:1 gid 3: no peer on another host lists 192.168.50.0/24" \
    "why: rank 1: cpus: no GPU or HCA to bind near: not bound; hca: on a /24 its peers on other hosts also list (no GPU known); not used: roceP2p1s0f0:1 gid 3: no peer on another host lists 10.9.9.0/24; not used: rocep1s0f0:1 gid 3: no peer on another host lists 172.16.5.0/24"
echo "$out" | grep -q '^tp rank 0 ([^)]*) bindings: b  *1  *0  .* -  *roceP2p1s0f1:1 10.2.1.2 gid 3, rocep1s0f1:1 10.1.1.2 gid 3  *-$' &&
    pass "rank 1's row" || fail "rank 1's row: $out"
hasnt "no warning with a shared /24" "warning"

# The same host a with another peer: the pick depends on the peer.
job "a with c" a,c -n 2
has "a and c share only rocep1s0f0's /24" \
    "rank 0 env: NCCL_IB_HCA==rocep1s0f0:1 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==rocep1s0f0:1 NCCL_IB_GID_INDEX=3"

# Three hosts: a's ports toward b and toward c together, nearest its GPU first (then in its peers' rank order);
# b and c share no /24, so each adds all its ports for the other and warns.
job "a, b and c" a,b,c -n 3
has "each rank uses the union of its per-peer picks" \
    "rank 0 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1,rocep1s0f0:1 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1,roceP2p1s0f0:1,rocep1s0f0:1 NCCL_IB_GID_INDEX=3" \
    "rank 2 env: NCCL_IB_HCA==rocep1s0f0:1 NCCL_IB_GID_INDEX=3"
[ "$(echo "$out" | grep -c 'hca: warning: rank [12] (host [bc]): no RoCE port on a /24 it also lists')" = 2 ] &&
    ! echo "$out" | grep -q '^tp rank 0 ([^)]*) hca: warning' && pass "b and c warn about each other, a does not" ||
    fail "three hosts' warnings: $out"

# No shared /24: every port, PCI-nearest first, and a warning naming TP_HCA on both ranks.
hca d mlx5_0 pci0000:00/0000:00:03.0/0000:03:00.0
roce d mlx5_0 1 eth2 10.77.0.4
job "no shared /24" a,d -n 2
has "no shared /24: PCI order and a warning" \
    "rank 0 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f0:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=3"
echo "$out" | grep -q "^tp rank 0 (a:[0-9]*) hca: warning: rank 1 (host d): no RoCE port on a /24 it also lists (this rank: roceP2p1s0f1:1 10.2.1.1, rocep1s0f0:1 192.168.50.1, rocep1s0f1:1 10.1.1.1; it: mlx5_0:1 10.77.0.4); using every port, nearest the GPU first: set TP_HCA to the ports cabled to it$" &&
    echo "$out" | grep -q "^tp rank 1 (d:[0-9]*) hca: warning: rank 0 (host a): no RoCE port on a /24" &&
    pass "the warning names the ports and TP_HCA" || fail "no-/24 warning: $out"
table "the why says so" "why: rank 1: cpus: no GPU or HCA to bind near: not bound; hca: no /24 shared with rank 0 (host a): every port, nearest the GPU first (set TP_HCA)"

# TP_HCA (NCCL_IB_HCA's grammar) narrows the ports on every rank before the match.
job "TP_HCA excludes a rail" a,b -n 2 -x 'TP_HCA=^=roceP2p1s0f1'
has "TP_HCA=^=roceP2p1s0f1 leaves rocep1s0f1" \
    "rank 0 env: NCCL_IB_HCA==rocep1s0f1:1 NCCL_IB_GID_INDEX=3" "rank 1 env: NCCL_IB_HCA==rocep1s0f1:1 NCCL_IB_GID_INDEX=3"
table "the report names the exclusion" \
    "why: rank 0: cpus: no GPU or HCA to bind near: not bound; hca: on a /24 its peers on other hosts also list, nearest the GPU 0002:02:00.0 first; not used: roceP2p1s0f0:1 not active (state 1: DOWN); not used: roceP2p1s0f1:1 excluded by TP_HCA; not used: rocep1s0f0:1 gid 3: no peer on another host lists 192.168.50.0/24"
job "TP_HCA names nothing usable" a,b -n 2 -x 'TP_HCA==mlx5_0'
has "TP_HCA==mlx5_0 on hosts without it: nothing exported" \
    "rank 0 env: NCCL_IB_HCA=(unset) NCCL_IB_GID_INDEX=(unset)" "rank 1 env: NCCL_IB_HCA=(unset) NCCL_IB_GID_INDEX=(unset)"
echo "$out" | grep -q '^tp rank 0 (a:[0-9]*) hca: warning: TP_HCA="=mlx5_0" leaves no usable RoCE port (roceP2p1s0f0:1 excluded by TP_HCA; ' &&
    pass "and a warning" || fail "TP_HCA==mlx5_0 warning: $out"

# The user's NCCL_IB_HCA / NCCL_IB_GID_INDEX are left as they are, and the report says so.
job "user's NCCL_IB_HCA" a,b -n 2 -x NCCL_IB_HCA=mlx5_7 -x NCCL_IB_GID_INDEX=1
has "NCCL variables the user set are kept" \
    "rank 0 env: NCCL_IB_HCA=mlx5_7 NCCL_IB_GID_INDEX=1" "rank 1 env: NCCL_IB_HCA=mlx5_7 NCCL_IB_GID_INDEX=1"
echo "$out" | grep -q "^tp rank 1 (b:[0-9]*) bindings: NCCL_IB_HCA=mlx5_7 set by the user: left as it is; NCCL_IB_GID_INDEX=1 set by the user: left as it is$" &&
    pass "reported as left alone" || fail "user's NCCL_IB_HCA: $out"

# Bad settings are refused by name before any rank starts.
for bad in 'TP_HCA=mlx5_0:0' 'TP_GID_INDEX=x'; do
    step "$bad"
    out=$(env "$bad" timeout 30 "$TPRUN" --ssh "$TOPO_SSH" -n 2 -H a,b "$TOPO_RANK" "$ROOTS" "$RANK_PROG" nccl-env 2>&1)
    st=$?
    [ $st != 0 ] && echo "$out" | grep -q "^tprun: ${bad%%=*}: " && ! echo "$out" | grep -q "^ready" &&
        pass "$bad refused: $(echo "$out" | head -1)" || fail "$bad: status $st: $out"
done
finish
