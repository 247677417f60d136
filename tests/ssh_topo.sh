#!/bin/bash
# The HCA pick over ssh namespace hosts a, b, c (tests/netns_lib.sh), each rank reading the fake sysfs of its host
# (tests/topo_lib.sh's seed 001 machines): the ports and the TCP interface in the report depend on the peer.
. "$(dirname "$0")/netns_lib.sh"
ROOTS=$D/roots
TOPO_SSH=$SSH
TOPO_IN="ip netns exec $NS_A"
. "$(dirname "$0")/topo_lib.sh"
seed_pair

job "a with b" a,b -n 2
has "a and b pick the rails they share" \
    "rank 0 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3" \
    "rank 1 env: NCCL_IB_HCA==roceP2p1s0f1:1,rocep1s0f1:1 NCCL_IB_GID_INDEX=3"
table "the report: each row's ports and TCP interface" \
    "a 0 0 $CPUS - 0002:02:00.0 roceP2p1s0f1:1 10.2.1.1 gid 3, rocep1s0f1:1 10.1.1.1 gid 3 mgmt0 198.18.1.1" \
    "b 1 0 $CPUS - - roceP2p1s0f1:1 10.2.1.2 gid 3, rocep1s0f1:1 10.1.1.2 gid 3 mgmt0 198.18.1.2"

job "a with c" a,c -n 2
has "a and c share only rocep1s0f0's /24" \
    "rank 0 env: NCCL_IB_HCA==rocep1s0f0:1 NCCL_IB_GID_INDEX=3" "rank 1 env: NCCL_IB_HCA==rocep1s0f0:1 NCCL_IB_GID_INDEX=3"
table "the report: c reached on rail0, its only shared /24" \
    "a 0 0 $CPUS - 0002:02:00.0 rocep1s0f0:1 192.168.50.1 gid 3 rail0 198.18.2.1" \
    "c 1 0 $CPUS - - rocep1s0f0:1 192.168.50.3 gid 3 rail0 198.18.2.3"
wait_no_leftovers 5 || fail "left running: $(leftovers)"
finish
