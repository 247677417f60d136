# ssh_tree_lib.sh: TREE_HOSTS test hosts h0..h(N-1) as network namespaces on one bridge, each with an sshd
# (sourced by tests/ssh_tree*.sh). Root only (else exit 77). Addresses 198.18.20.1.. /24 live only inside the
# namespaces; the root namespace gets one address-less bridge. Everything is torn down on exit, whatever happens.
# Host "refuses" is h0's address on a port nothing listens on: ssh to it fails at once.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/proc_lib.sh"
if [ -z "${NETNS_TEST_TIMED:-}" ]; then
    NETNS_TEST_TIMED=1
    export NETNS_TEST_TIMED
    exec timeout -k 5 "${NETNS_TEST_TIMEOUT:-280}" bash "$0" "$@"
fi

[ "$(id -u)" = 0 ] || { echo "skip: network namespaces and sshd need root"; exit 77; }
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
for t in ip ssh ssh-keygen "$SSHD"; do
    command -v "$t" >/dev/null 2>&1 || { echo "skip: $t not found"; exit 77; }
done

TREE_HOSTS=${TREE_HOSTS:-16}
TPRUN=${TPRUN:-$PWD/tprun}
RANK_PROG=${RANK_PROG:-$PWD/tests/runtime_rank}
ID=$(printf '%04x' $((($$ + RANDOM) % 65536)))
BRIDGE=tp${ID}t
D=$(mktemp -d "${TMPDIR:-/tmp}/netns-tree.XXXXXX")
SSHD_PIDS=()
TEST_PIDS=()
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
finish() { [ "$fails" -eq 0 ] && exit 0; echo "$fails check(s) failed"; exit 1; }
step() { echo "== ${SECONDS}s: $*"; }
ns_of() { echo "tp${ID}h$1"; }
all_ns() { local i; for i in $(seq 0 $((TREE_HOSTS - 1))); do ns_of "$i"; done; }

tree_teardown() {
    local p ns all
    for p in "${TEST_PIDS[@]}" "${SSHD_PIDS[@]}"; do disown "$p" 2>/dev/null; done
    all=$(for p in "${TEST_PIDS[@]}" "${SSHD_PIDS[@]}"; do own_child "$p" && echo "$p"; done)
    all="$all $(for ns in $(all_ns); do ip netns pids "$ns" 2>/dev/null; done)"
    for p in $all; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 1 40); do
        for p in $all; do alive "$p" && break; done
        alive "$p" || break
        sleep 0.05
    done
    for p in $all; do kill -KILL "$p" 2>/dev/null; done
    for ns in $(all_ns); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    for l in $(ip -br link | awk '{print $1}' | sed 's/@.*//' | grep "^tp${ID}"); do ip link del "$l" 2>/dev/null; done
    for p in $all; do
        own_child "$p" || continue
        for _ in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
    done
    rm -rf "$D"
}
trap tree_teardown EXIT
trap 'echo "FAIL: timed out"; exit 124' TERM

tree_setup() {
    ip link add "$BRIDGE" type bridge && ip link set "$BRIDGE" up || return 1
    mkdir -p /run/sshd "$D/home"
    ssh-keygen -q -t ed25519 -N '' -f "$D/hostkey" && ssh-keygen -q -t ed25519 -N '' -f "$D/id" || return 1
    cp "$D/id.pub" "$D/authorized_keys"
    local i ns addr host_env="HOME=$D/home" v probes=()
    for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do [ -n "${!v:-}" ] && host_env="$host_env $v=${!v}"; done
    : >"$D/ssh_config"
    for i in $(seq 0 $((TREE_HOSTS - 1))); do
        ns=$(ns_of "$i") addr=198.18.20.$((i + 1))
        ip netns add "$ns" && ip -n "$ns" link set lo up &&
            ip link add "tp${ID}v$i" type veth peer name eth0 netns "$ns" &&
            ip link set "tp${ID}v$i" master "$BRIDGE" up &&
            ip -n "$ns" addr add "$addr/24" dev eth0 && ip -n "$ns" link set eth0 up || return 1
        printf 'Host h%d\n    HostName %s\n' "$i" "$addr" >>"$D/ssh_config"
        # ip netns exec execs sshd: $! is sshd itself.
        ip netns exec "$ns" "$SSHD" -D -e -f /dev/null -h "$D/hostkey" -o ListenAddress="$addr" -o PidFile=none \
            -o AuthorizedKeysFile="$D/authorized_keys" -o StrictModes=no -o PermitRootLogin=prohibit-password \
            -o UsePAM=no -o PasswordAuthentication=no -o MaxStartups=100 -o "SetEnv=$host_env" 2>>"$D/sshd.log" &
        SSHD_PIDS+=($!)
    done
    cat >>"$D/ssh_config" <<EOF
Host refuses
    HostName 198.18.20.1
    Port 2222
Host *
    User root
    IdentityFile $D/id
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    BatchMode yes
    LogLevel ERROR
    KexAlgorithms curve25519-sha256
    Ciphers aes128-gcm@openssh.com
EOF
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

comm_of() { local c=; read -r c 2>/dev/null <"/proc/$1/comm"; echo "$c"; }

# leftovers: processes in the test hosts other than the sshds and their per-connection children.
leftovers() {
    local p out= comm ns
    for ns in $(all_ns); do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            case " ${SSHD_PIDS[*]} " in *" $p "*) continue ;; esac
            alive "$p" || continue
            comm=$(comm_of "$p")
            [ "$comm" = sshd ] && continue
            out="$out $p($comm)"
        done
    done
    echo "$out"
}

# wait_no_leftovers SECONDS: until no job process is left in any test host.
wait_no_leftovers() {
    local end=$((SECONDS + $1))
    while [ -n "$(leftovers)" ]; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.05
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
