# netns_lib.sh: test hosts a, b, c (and d .. h when NETNS_HOSTS asks, e.g. NETNS_HOSTS="a b c d") as network
# namespaces, each with an sshd (sourced by tests/ssh_*.sh). Root only (else exit 77). Every address lives inside a
# namespace (198.18.0.0/15); the root namespace gets only address-less bridges. Everything made here is torn down on
# exit, whatever the test's outcome.
#
#   host  mgmt0 (ssh)      rail0           rail1           decoy0 (a veth whose peer stays in the host)
#   a     198.18.1.1/24    198.18.2.1/24   198.18.3.1/24   198.18.101.1/24
#   b     198.18.1.2/24    198.18.2.2/24   198.18.3.2/24   198.18.102.1/24
#   c     198.18.4.3/24    198.18.2.3/24   198.18.6.3/24   198.18.103.1/24
#   d..h  as a and b: the i-th host (d = 4) has 198.18.1.i, 198.18.2.i, 198.18.3.i and 198.18.10i.1
# c's mgmt0 is on the same wire as a's and b's but on another /24 (reached through on-link routes): c shares
# only rail0's /24 with the others. In c's sshd a tmpfs hides $NETNS_HIDDEN: there the program is missing.
. "$(dirname "${BASH_SOURCE[0]}")/netns_base.sh"

TPRUN=${TPRUN:-$PWD/tprun}
RANK_PROG=${RANK_PROG:-$PWD/tests/runtime_rank}
ID=$(printf '%04x' $((($$ + RANDOM) % 65536)))
NETNS_HOSTS=${NETNS_HOSTS:-a b c}
case " $NETNS_HOSTS " in
" a b c "*) ;;
*) echo "FAIL: NETNS_HOSTS must start with a b c, then any of d .. h in order: got '$NETNS_HOSTS'"; exit 1 ;;
esac
NS_A=tp${ID}a NS_B=tp${ID}b NS_C=tp${ID}c
BRIDGES="tp${ID}m tp${ID}r0 tp${ID}r1"
D=$(mktemp -d "${TMPDIR:-/tmp}/netns-test.XXXXXX")
NETNS_HIDDEN=$D/hidden
SSHD_PIDS=()
TEST_PIDS=()
NETNS_LIST=$(for h in $NETNS_HOSTS; do printf 'tp%s%s ' "$ID" "$h"; done)

# in_ns HOST CMD...: runs CMD on test host a, b, c (or d .. h).
in_ns() {
    local ns=tp${ID}$1
    shift
    ip netns exec "$ns" "$@"
}

# host_index HOST: a is 1, b 2, ... h 8.
host_index() { printf '%d' $(($(printf '%d' "'$1") - 96)); }

# link HOST NAME BRIDGE ADDR: a veth from the host (named NAME, with ADDR) to a bridge in the root namespace.
link() {
    local ns=$1 name=$2 br=$3 addr=$4 outside=tp${ID}${1: -1}${2: -1}${2:0:1}
    ip link add "$outside" type veth peer name "$name" netns "$ns" || return 1
    ip link set "$outside" master "$br" up || return 1
    ip -n "$ns" addr add "$addr" dev "$name" && ip -n "$ns" link set "$name" up
}

netns_setup() {
    for br in $BRIDGES; do ip link add "$br" type bridge && ip link set "$br" up || return 1; done
    local i=0 host ns
    for host in $NETNS_HOSTS; do
        i=$(host_index "$host")
        [ "$i" -ge 1 ] && [ "$i" -le 8 ] || { echo "NETNS_HOSTS: no test host '$host' (a .. h)"; return 1; }
        ns=tp${ID}${host}
        ip netns add "$ns" || return 1
        ip -n "$ns" link set lo up
        case $host in
        a | b | d | e | f | g | h)
            link "$ns" mgmt0 "tp${ID}m" "198.18.1.$i/24" &&
                ip -n "$ns" route add 198.18.4.0/24 dev mgmt0 &&
                link "$ns" rail0 "tp${ID}r0" "198.18.2.$i/24" &&
                link "$ns" rail1 "tp${ID}r1" "198.18.3.$i/24" || return 1
            ;;
        c)
            link "$ns" mgmt0 "tp${ID}m" 198.18.4.3/24 &&
                ip -n "$ns" route add 198.18.1.0/24 dev mgmt0 &&
                link "$ns" rail0 "tp${ID}r0" 198.18.2.3/24 &&
                link "$ns" rail1 "tp${ID}r1" 198.18.6.3/24 || return 1
            ;;
        esac
        ip -n "$ns" link add decoy0 type veth peer name decoy0p &&
            ip -n "$ns" addr add "198.18.10$i.1/24" dev decoy0 &&
            ip -n "$ns" link set decoy0 up && ip -n "$ns" link set decoy0p up || return 1
    done
    mkdir -p "$NETNS_HIDDEN"
    netns_keys || return 1
    cat >"$D/ssh_config" <<EOF
Host a
    HostName 198.18.1.1
Host b
    HostName 198.18.1.2
Host c
    HostName 198.18.4.3
$(for host in $NETNS_HOSTS; do
        case $host in a | b | c) ;; *) printf 'Host %s\n    HostName 198.18.1.%s\n' "$host" "$(host_index "$host")" ;; esac
    done)
Host gone
    HostName 198.18.1.99
Host refuses
    HostName 198.18.1.2
    Port 2222
EOF
    netns_ssh_defaults >>"$D/ssh_config"
    SSH="ssh -F $D/ssh_config"
    local addr
    for host in $NETNS_HOSTS; do
        case $host in c) addr=198.18.4.3 ;; *) addr=198.18.1.$(host_index "$host") ;; esac
        local hide=:
        [ $host = c ] && hide="mount -t tmpfs tmpfs $NETNS_HIDDEN"
        netns_sshd "tp${ID}$host" "$addr" "$hide"
    done
    # Test-only polling until every sshd answers (a daemon's readiness has no other signal here).
    for host in $NETNS_HOSTS; do
        local ok=0
        for _ in $(seq 1 100); do
            in_ns a $SSH "$host" true 2>/dev/null && ok=1 && break
            sleep 0.05
        done
        [ $ok = 1 ] || { echo "sshd on $host did not answer: $(cat "$D/sshd.log")"; return 1; }
    done
}

# tprun_on_a ARGS...: tprun run on host a with the test's ssh config.
tprun_on_a() { in_ns a "$TPRUN" --ssh "$SSH" "$@"; }

# kill_and_time "ACTION" PIDS...: runs ACTION (a shell command), then polls /proc every millisecond until none of
# PIDS is alive (a zombie is dead); prints the milliseconds from the action's start, or "never" after 10 s.
kill_and_time() {
    python3 - "$@" <<'PY'
import subprocess, sys, time
action, pids = sys.argv[1], sys.argv[2:]
t0 = time.time()
subprocess.run(["sh", "-c", action])
def alive(p):
    try:
        with open("/proc/%s/stat" % p) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
while time.time() - t0 < 10:
    if not any(alive(p) for p in pids):
        print(int((time.time() - t0) * 1000))
        sys.exit(0)
    time.sleep(0.001)
print("never")
PY
}

if ! netns_setup; then
    echo "FAIL: could not build the test hosts"
    exit 1
fi
