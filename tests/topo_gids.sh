#!/bin/bash
# RoCE ports and GID tables as machines have them (tests/topo_lib.sh): an 8-GPU 8-HCA server pair, inactive and
# InfiniBand ports, a sparse GID table with VLAN and unreadable entries, TP_GID_INDEX, and a GID table that changes
# between two runs. Each case checks what every rank exports for NCCL and rank 0's report.
. "$(dirname "$0")/runtime_lib.sh"
. "$(dirname "$0")/topo_lib.sh"

# Two 8-GPU servers, two ranks each: every rank lists all eight rails (each /24 is shared), its own GPU's HCA first,
# then the others of its root complex, then the far ones. Not bound (the fake hosts are all this one, whose cores
# two local ranks would share): each row's CPUs are tprun's own.
server s1 1
server s2 2
job "8-GPU 8-HCA servers" s1:2,s2:2 -n 4 --bind-to none
near0="mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
near1="mlx5_1:1,mlx5_0:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
has "each rank's GPU's HCA first" "rank 0 env: NCCL_IB_HCA==$near0 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==$near1 NCCL_IB_GID_INDEX=3" "rank 2 env: NCCL_IB_HCA==$near0 NCCL_IB_GID_INDEX=3" \
    "rank 3 env: NCCL_IB_HCA==$near1 NCCL_IB_GID_INDEX=3"
r=$(echo "$out" | sed -n 's/^tp rank 0 ([^)]*) bindings: \(s2  *3  *1 .*\)$/\1/p' | tr -s ' ')
[ "$r" = "s2 3 1 $CPUS - 0000:11:00.0 mlx5_1:1 10.10.1.2 gid 3, mlx5_0:1 10.10.0.2 gid 3, mlx5_2:1 10.10.2.2 gid 3, mlx5_3:1 10.10.3.2 gid 3, mlx5_4:1 10.10.4.2 gid 3, mlx5_5:1 10.10.5.2 gid 3, mlx5_6:1 10.10.6.2 gid 3, mlx5_7:1 10.10.7.2 gid 3 -" ] &&
    pass "rank 3's row" || fail "rank 3's row \"$r\" in: $out"
table "why: the nearest GPU" \
    "why: rank 3: cpus: --bind-to none; hca: on a /24 its peers on other hosts also list, nearest the GPU 0000:11:00.0 first"

# Inactive and InfiniBand ports are left out, with the reason; e's DOWN port shares f's mlx5_1 /24 but is not used.
hca e mlx5_0 pci0000:00/0000:00:01.0/0000:01:00.0
port e mlx5_0 1 "4: ACTIVE" InfiniBand
gid e mlx5_0 1 0 fe80:0000:0000:0000:0002:c903:0000:0001 - -
hca e mlx5_1 pci0000:00/0000:00:02.0/0000:02:00.0
roce e mlx5_1 1 eth1 10.4.4.5
echo "1: DOWN" >"$ROOTS/e/class/infiniband/mlx5_1/ports/1/state"
hca e mlx5_2 pci0000:00/0000:00:03.0/0000:03:00.0
roce e mlx5_2 1 eth2 10.4.5.5
echo "2: INIT" >"$ROOTS/e/class/infiniband/mlx5_2/ports/1/state"
hca e mlx5_3 pci0000:00/0000:00:04.0/0000:04:00.0
roce e mlx5_3 1 eth3 10.3.3.5
roce e mlx5_3 2 eth4 10.3.4.5 # a second port, on a /24 nobody else has
hca f mlx5_0 pci0000:00/0000:00:01.0/0000:01:00.0
roce f mlx5_0 1 eth0 10.3.3.6
hca f mlx5_1 pci0000:00/0000:00:02.0/0000:02:00.0
roce f mlx5_1 1 eth1 10.4.4.6
job "inactive and InfiniBand ports" e,f -n 2
has "only active RoCE ports on a shared /24" "rank 0 env: NCCL_IB_HCA==mlx5_3:1 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=3"
table "the report says why each other port is not used" \
    "why: rank 0: cpus: no GPU or HCA to bind near: not bound; hca: on a /24 its peers on other hosts also list (no GPU known); not used: mlx5_0:1 link layer InfiniBand, not Ethernet (RoCE); not used: mlx5_1:1 not active (state 1: DOWN); not used: mlx5_2:1 not active (state 2: INIT); not used: mlx5_3:2 gid 3: no peer on another host lists 10.3.4.0/24" \
    "why: rank 1: cpus: no GPU or HCA to bind near: not bound; hca: on a /24 its peers on other hosts also list (no GPU known); not used: mlx5_1:1 gid 3: no peer on another host lists 10.4.4.0/24"

# A sparse GID table: empty entries, link-local ones, gaps, an IPv6 one, a v1-only address, an entry whose type the
# kernel cannot give (index 7, on a /24 h lists: not usable), and a VLAN device's address at index 8: the one h
# shares.
hca g mlx5_0 pci0000:00/0000:00:01.0/0000:01:00.0
port g mlx5_0 1 "4: ACTIVE" Ethernet
empty_gids g mlx5_0 1 0 0
gid g mlx5_0 1 1 fe80:0000:0000:0000:0a00:00ff:fe00:0007 "RoCE v2" eth0
gid g mlx5_0 1 4 10.5.5.7 "IB/RoCE v1" eth0
gid g mlx5_0 1 5 10.5.5.7 "RoCE v2" eth0
empty_gids g mlx5_0 1 6 6
gid g mlx5_0 1 7 10.60.0.7 - eth0.200
gid g mlx5_0 1 8 10.50.0.7 "RoCE v2" eth0.100
gid g mlx5_0 1 9 10.60.0.7 "IB/RoCE v1" eth0.200
gid g mlx5_0 1 10 fd00:0000:0000:0000:0000:0000:0000:0007 "RoCE v2" eth0
gid g mlx5_0 1 12 10.70.0.7 "IB/RoCE v1" eth0.300
hca h mlx5_0 pci0000:00/0000:00:01.0/0000:01:00.0
roce h mlx5_0 1 eth0 10.50.0.8
gid h mlx5_0 1 4 10.60.0.8 "RoCE v2" eth0.200
gid h mlx5_0 1 5 10.70.0.8 "RoCE v2" eth0.300
job "sparse GID table with VLANs" g,h -n 2
has "g uses the VLAN GID at index 8, h its index 3" "rank 0 env: NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=8" \
    "rank 1 env: NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=3"
table "the report shows each rank's GID" "why: rank 0: cpus: no GPU or HCA to bind near: not bound; hca: on a /24 its peers on other hosts also list (no GPU known); not used: mlx5_0:1 gid 5: no peer on another host lists 10.5.5.0/24"
r=$(echo "$out" | sed -n 's/^tp rank 0 ([^)]*) bindings: \(g  *0 .*\)$/\1/p' | tr -s ' ')
[ "$r" = "g 0 0 $CPUS - - mlx5_0:1 10.50.0.7 gid 8 -" ] && pass "g's row" || fail "g's row \"$r\": $out"

# TP_GID_INDEX=5: only that index counts; g's (10.5.5.7) and h's (10.70.0.8) share no /24: a warning, index 5.
job "TP_GID_INDEX=5" g,h -n 2 -x TP_GID_INDEX=5
has "index 5 on both" "rank 0 env: NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=5" \
    "rank 1 env: NCCL_IB_HCA==mlx5_0:1 NCCL_IB_GID_INDEX=5"
[ "$(echo "$out" | grep -c 'hca: warning: rank [01] (host [gh]): no RoCE port on a /24 it also lists (this rank: mlx5_0:1 10\.\(5\.5\.7\|70\.0\.8\); it: mlx5_0:1 10\.\(5\.5\.7\|70\.0\.8\))')" = 2 ] &&
    pass "both warn" || fail "TP_GID_INDEX=5 warnings: $out"
job "TP_GID_INDEX=2 (v1 entries only there)" g,h -n 2 -x TP_GID_INDEX=2
has "no usable port: nothing exported" "rank 0 env: NCCL_IB_HCA=(unset) NCCL_IB_GID_INDEX=(unset)" \
    "rank 1 env: NCCL_IB_HCA=(unset) NCCL_IB_GID_INDEX=(unset)"
table "the report says so" "why: rank 1: cpus: no GPU or HCA to bind near: not bound; hca: no usable RoCE port; not used: mlx5_0:1 no IPv4 RoCE v2 GID at TP_GID_INDEX=2"

# The GID table changes between runs (an address removed and added again moves to new indexes): the second run
# reads the new indexes; a's two rails now differ, so NCCL_IB_GID_INDEX cannot name both and is not set.
seed_pair
job "before the change" a,b -n 2
has "index 3 before" "rank 0 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3"
empty_gids a rocep1s0f1 1 2 3
gid a rocep1s0f1 1 6 10.1.1.1 "IB/RoCE v1" enp1s0f1np1
gid a rocep1s0f1 1 7 10.1.1.1 "RoCE v2" enp1s0f1np1
job "after the change" a,b -n 2
has "the new index, and no NCCL_IB_GID_INDEX for two indexes" \
    "rank 0 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=(unset)" \
    "rank 1 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3"
table "the report shows index 7" \
    "a 0 0 $CPUS - 0002:02:00.0 roceP2p1s0f1:1 10.2.1.1 gid 3, rocep1s0f1:1 10.1.1.1 gid 7 -"
echo "$out" | grep -q "^tp rank 0 (a:[0-9]*) hca: warning: the chosen ports' IPv4 RoCE v2 GIDs have different indexes and NCCL takes one: NCCL_IB_GID_INDEX is not set; set TP_GID_INDEX to one index every port has$" &&
    pass "a warns" || fail "different indexes: $out"
finish
