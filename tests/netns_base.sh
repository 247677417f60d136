# netns_base.sh: what every namespace-hosts library shares (sourced by tests/netns_lib.sh and
# tests/ssh_tree_lib.sh, which set NETNS_LIST, BRIDGES, ID, D, SSHD_PIDS and TEST_PIDS): the hang guard, the root
# check, the test's verdicts, the teardown, the ssh client settings, the sshd command and the leftovers check.
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


# netns_names: the namespaces of this test (set by the sourcing library).
netns_names() { echo "${NETNS_LIST:-}"; }

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
    all="$all $(for ns in $(netns_names); do ip netns pids "$ns" 2>/dev/null; done)"
    # SIGTERM first: a login shell of the hosts' ssh sessions may hold a lock of the machine's own (pyenv's
    # rehash lock in root's .bashrc) that only its exit trap removes; SIGKILL for what is left after 2 s.
    for p in $all; do kill -TERM "$p" 2>/dev/null; done
    for _ in $(seq 1 40); do
        for p in $all; do alive "$p" && break; done
        alive "$p" || break
        sleep 0.05
    done
    for p in $all; do kill -KILL "$p" 2>/dev/null; done
    for ns in $(netns_names); do
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

# netns_ssh_defaults: the ssh client settings of every test host (after the file's own Host entries).
netns_ssh_defaults() {
    cat <<EOF
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
}

# netns_keys: the hosts' key and the client's, and an empty home for the hosts' logins: root's own rc files (on
# this machine its .bashrc runs `pyenv init`, 5 s a login under load, and a killed login leaves pyenv's lock
# behind) are not the test's.
netns_keys() {
    mkdir -p /run/sshd "$D/home"
    ssh-keygen -q -t ed25519 -N '' -f "$D/hostkey" && ssh-keygen -q -t ed25519 -N '' -f "$D/id" || return 1
    cp "$D/id.pub" "$D/authorized_keys"
    # A sanitizer build's settings (tests/local.mk) reach the hosts' logins too, as they reach local ranks.
    NETNS_HOST_ENV="HOME=$D/home"
    local v
    for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
        [ -n "${!v:-}" ] && NETNS_HOST_ENV="$NETNS_HOST_ENV $v=${!v}"
    done
    return 0
}

# netns_sshd NS ADDR [PRE]: an sshd in namespace NS listening on ADDR, after the shell command PRE; its pid joins
# SSHD_PIDS (ip netns exec and sh both exec: $! is sshd itself).
netns_sshd() {
    ip netns exec "$1" sh -c "${3:-:} && exec $SSHD -D -e -f /dev/null -h $D/hostkey \
        -o ListenAddress=$2 -o PidFile=none -o AuthorizedKeysFile=$D/authorized_keys -o StrictModes=no \
        -o PermitRootLogin=prohibit-password -o UsePAM=no -o PasswordAuthentication=no -o MaxStartups=100 \
        -o 'SetEnv=$NETNS_HOST_ENV'" \
        2>>"$D/sshd.log" &
    SSHD_PIDS+=($!)
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
    for ns in $(netns_names); do
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

