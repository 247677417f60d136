# netns_lib.sh: three test hosts a, b, c as network namespaces, each with an sshd (sourced by tests/ssh_*.sh).
# Root only (else exit 77). Every address lives inside a namespace (198.18.0.0/15); the root namespace gets
# only address-less bridges. Everything made here is torn down on exit, whatever the test's outcome.
#
#   host  mgmt0 (ssh)      rail0           rail1           decoy0 (a veth whose peer stays in the host)
#   a     198.18.1.1/24    198.18.2.1/24   198.18.3.1/24   198.18.101.1/24
#   b     198.18.1.2/24    198.18.2.2/24   198.18.3.2/24   198.18.102.1/24
#   c     198.18.4.3/24    198.18.2.3/24   198.18.6.3/24   198.18.103.1/24
# c's mgmt0 is on the same wire as a's and b's but on another /24 (reached through on-link routes): c shares
# only rail0's /24 with the others. In c's sshd a tmpfs hides $NETNS_HIDDEN: there the program is missing.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/proc_lib.sh"
# The limit is a hang guard (make check's own is 300 s): on the shared 2-core machine pmix_ssh.sh, the longest,
# took 85 s at load 17 and 130-190 s at load 21-25, every step slower alike (its "== Ns:" lines show it).
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

TPRUN=${TPRUN:-$PWD/tprun}
RANK_PROG=${RANK_PROG:-$PWD/tests/runtime_rank}
ID=$(printf '%04x' $((($$ + RANDOM) % 65536)))
NS_A=tp${ID}a NS_B=tp${ID}b NS_C=tp${ID}c
BRIDGES="tp${ID}m tp${ID}r0 tp${ID}r1"
D=$(mktemp -d "${TMPDIR:-/tmp}/netns-test.XXXXXX")
NETNS_HIDDEN=$D/hidden
SSHD_PIDS=()
TEST_PIDS=()
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }
finish() { [ "$fails" -eq 0 ] && exit 0; echo "$fails check(s) failed"; exit 1; }
# step WHAT: says what the test starts now, and when, so that a slow or hung test's log shows where it is.
step() { echo "== ${SECONDS}s: $*"; }

netns_teardown() {
    local p ns all
    # Disowned first: bash would print a "Killed" notice for each job of its that a signal ends.
    for p in "${TEST_PIDS[@]}" "${SSHD_PIDS[@]}"; do disown "$p" 2>/dev/null; done
    all=$(for p in "${TEST_PIDS[@]}" "${SSHD_PIDS[@]}"; do own_child "$p" && echo "$p"; done)
    all="$all $(for ns in $NS_A $NS_B $NS_C; do ip netns pids "$ns" 2>/dev/null; done)"
    # SIGTERM first: a login shell of the hosts' ssh sessions may hold a lock of the machine's own (pyenv's
    # rehash lock in root's .bashrc) that only its exit trap removes; SIGKILL for what is left after 2 s.
    for p in $all; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 1 40); do
        for p in $all; do alive "$p" && break; done
        alive "$p" || break
        sleep 0.05
    done
    for p in $all; do kill -KILL "$p" 2>/dev/null; done
    for ns in $NS_A $NS_B $NS_C; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    # A namespace outlives its name while a socket of it lingers (a link taken down leaves TCP retrying):
    # its veths' ends here are deleted by name, which takes their peers and that namespace's links with them.
    for l in $(ip -br link | awk '{print $1}' | sed 's/@.*//' | grep "^tp${ID}"); do ip link del "$l" 2>/dev/null; done
    for br in $BRIDGES; do ip link del "$br" 2>/dev/null; done
    # Test-only polling: a disowned job cannot be waited for; a zombie counts as dead.
    for p in $all; do
        own_child "$p" || continue
        for _ in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
    done
    rm -rf "$D"
}
trap netns_teardown EXIT
trap 'echo "FAIL: timed out"; exit 124' TERM

# in_ns HOST CMD...: runs CMD on test host a, b or c.
in_ns() {
    local ns
    case $1 in a) ns=$NS_A ;; b) ns=$NS_B ;; c) ns=$NS_C ;; esac
    shift
    ip netns exec "$ns" "$@"
}

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
    for host in a b c; do
        i=$((i + 1))
        ns=tp${ID}${host}
        ip netns add "$ns" || return 1
        ip -n "$ns" link set lo up
        case $host in
        a | b)
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
    # The hosts' logins get an empty home: root's own rc files (on this machine its .bashrc runs `pyenv init`,
    # 5 s a login under load, and a killed login leaves pyenv's lock behind) are not the test's.
    mkdir -p /run/sshd "$NETNS_HIDDEN" "$D/home"
    ssh-keygen -q -t ed25519 -N '' -f "$D/hostkey" && ssh-keygen -q -t ed25519 -N '' -f "$D/id" || return 1
    cp "$D/id.pub" "$D/authorized_keys"
    cat >"$D/ssh_config" <<EOF
Host a
    HostName 198.18.1.1
Host b
    HostName 198.18.1.2
Host c
    HostName 198.18.4.3
Host gone
    HostName 198.18.1.99
Host refuses
    HostName 198.18.1.2
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
    # A sanitizer build's settings (tests/local.mk) reach the hosts' logins too, as they reach local ranks.
    local addr host_env="HOME=$D/home" v
    for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do [ -n "${!v:-}" ] && host_env="$host_env $v=${!v}"; done
    for host in a b c; do
        case $host in a) addr=198.18.1.1 ;; b) addr=198.18.1.2 ;; c) addr=198.18.4.3 ;; esac
        local hide=:
        [ $host = c ] && hide="mount -t tmpfs tmpfs $NETNS_HIDDEN"
        # ip netns exec and sh both exec: $! is sshd itself (in_ns, a shell function, would give a subshell).
        ip netns exec "tp${ID}$host" sh -c "$hide && exec $SSHD -D -e -f /dev/null -h $D/hostkey \
            -o ListenAddress=$addr -o PidFile=none -o AuthorizedKeysFile=$D/authorized_keys -o StrictModes=no \
            -o PermitRootLogin=prohibit-password -o UsePAM=no -o PasswordAuthentication=no -o MaxStartups=100 \
            -o 'SetEnv=$host_env'" \
            2>>"$D/sshd.log" &
        SSHD_PIDS+=($!)
    done
    # Test-only polling until every sshd answers (a daemon's readiness has no other signal here).
    for host in a b c; do
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

# comm_of PID: the process's name, or nothing.
comm_of() { local c=; read -r c 2>/dev/null <"/proc/$1/comm"; echo "$c"; }

# cmdline_of PID: its arguments joined by spaces (builtins only).
cmdline_of() {
    local args=()
    mapfile -d '' -t args 2>/dev/null <"/proc/$1/cmdline"
    echo "${args[*]}"
}

# leftovers: pids in the test namespaces other than the sshds, and any tprun agent of this build.
leftovers() {
    local p out= comm
    for ns in $NS_A $NS_B $NS_C; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do
            case " ${SSHD_PIDS[*]} " in *" $p "*) continue ;; esac
            alive "$p" || continue
            comm=$(comm_of "$p")
            # sshd's per-connection children are the test's own plumbing, not the job's.
            [ "$comm" = sshd ] && continue
            out="$out $p($comm)"
        done
    done
    echo "$out"
}

# wait_no_leftovers SECONDS: until no job process is left in any test host.
# Bounded by the clock, not by a count of tries: on a loaded machine one look (three scans of /proc) took 0.8 s.
wait_no_leftovers() {
    local end=$((SECONDS + $1))
    while [ -n "$(leftovers)" ]; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.05
    done
}

if ! netns_setup; then
    echo "FAIL: could not build the test hosts"
    exit 1
fi
