# ssh_tree_lib.sh: TREE_HOSTS test hosts h0..h(N-1) as network namespaces on one bridge, each with an sshd
# (sourced by tests/ssh_tree*.sh). Root only (else exit 77). Addresses 198.18.20.1.. /24 live only inside the
# namespaces; the root namespace gets one address-less bridge. Everything is torn down on exit, whatever happens.
# Host "refuses" is h0's address on a port nothing listens on: ssh to it fails at once.
. "$(dirname "${BASH_SOURCE[0]}")/netns_base.sh"

TREE_HOSTS=${TREE_HOSTS:-16}
TPRUN=${TPRUN:-$PWD/tprun}
RANK_PROG=${RANK_PROG:-$PWD/tests/runtime_rank}
ID=$(printf '%04x' $((($$ + RANDOM) % 65536)))
BRIDGE=tp${ID}t
D=$(mktemp -d "${TMPDIR:-/tmp}/netns-tree.XXXXXX")
SSHD_PIDS=()
TEST_PIDS=()
ns_of() { echo "tp${ID}h$1"; }
NETNS_LIST=$(for i in $(seq 0 $((TREE_HOSTS - 1))); do ns_of "$i"; done)
BRIDGES=$BRIDGE

tree_setup() {
    ip link add "$BRIDGE" type bridge && ip link set "$BRIDGE" up || return 1
    netns_keys || return 1
    local i ns addr probes=()
    : >"$D/ssh_config"
    for i in $(seq 0 $((TREE_HOSTS - 1))); do
        ns=$(ns_of "$i") addr=198.18.20.$((i + 1))
        ip netns add "$ns" && ip -n "$ns" link set lo up &&
            ip link add "tp${ID}v$i" type veth peer name eth0 netns "$ns" &&
            ip link set "tp${ID}v$i" master "$BRIDGE" up &&
            ip -n "$ns" addr add "$addr/24" dev eth0 && ip -n "$ns" link set eth0 up || return 1
        printf 'Host h%d\n    HostName %s\n' "$i" "$addr" >>"$D/ssh_config"
        netns_sshd "$ns" "$addr"
    done
    cat >>"$D/ssh_config" <<EOF
Host refuses
    HostName 198.18.20.1
    Port 2222
EOF
    netns_ssh_defaults >>"$D/ssh_config"
    SSH="ssh -F $D/ssh_config"
    # Test-only polling until every sshd answers (a daemon's readiness has no other signal here), all hosts at
    # once: one login takes about a second on the loaded machine.
    for i in $(seq 0 $((TREE_HOSTS - 1))); do
        (
            for _ in $(seq 1 200); do
                ip netns exec "$(ns_of 0)" $SSH "h$i" true 2>/dev/null && exit 0
                sleep 0.05
            done
            exit 1
        ) &
        probes+=($!)
    done
    for i in "${!probes[@]}"; do
        wait "${probes[$i]}" || { echo "sshd on h$i did not answer: $(cat "$D/sshd.log")"; return 1; }
    done
}

# agent_on HOST_INDEX: the pid of the tprun agent in that host, or nothing.
agent_on() {
    local p
    for p in $(ip netns pids "$(ns_of "$1")" 2>/dev/null); do
        [ "$(comm_of "$p")" = tprun ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- '--agent' && echo "$p"
    done
}

step "building $TREE_HOSTS test hosts"
if ! tree_setup; then
    echo "FAIL: could not build the test hosts"
    exit 1
fi
step "test hosts up"
