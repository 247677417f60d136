#!/bin/bash
# slurm-test-setup.sh: a private one-node Slurm (munged, slurmctld, slurmd) in a directory, for the PMIx tests.
#   slurm-test-setup.sh start DIR   installs slurm-wlm and munge if missing (root), starts the daemons with their
#                                   state, logs, sockets and free ports under DIR, waits until the node is idle;
#                                   prints "export SLURM_CONF=DIR/slurm.conf". Exits 77 when Slurm cannot run here.
#                                   DIR's parents must be searchable by the munge user (munged checks its socket's).
#   slurm-test-setup.sh stop DIR    stops the daemons it started (by the PIDs recorded in DIR).
set -u

die() { echo "slurm-test-setup.sh: $*" >&2; exit "${2:-1}"; }

stop() {
    local dir=$1 pid
    for name in slurmd slurmctld munged; do
        [ -f "$dir/$name.started" ] || continue
        pid=$(cat "$dir/$name.started")
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$pid" 2>/dev/null
        rm -f "$dir/$name.started"
    done
    return 0
}

install_missing() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null &&
        command -v munged >/dev/null && return 0
    [ "$(id -u)" -eq 0 ] || die "slurm-wlm and munge are not installed and this is not root" 77
    echo "slurm-test-setup.sh: installing slurm-wlm munge" >&2
    DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y --no-install-recommends slurm-wlm munge \
        >"$1/apt.log" 2>&1 || die "apt-get install slurm-wlm munge failed (see $1/apt.log)" 77
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a daemon in the foreground mode (-D/-F) in the background; its PID is recorded for stop.
launch() {
    local dir=$1 name=$2
    shift 2
    "$@" >"$dir/$name.out" 2>&1 </dev/null &
    echo $! >"$dir/$name.started"
}

start() {
    local dir=$1 host
    [ "$(id -u)" -eq 0 ] || die "the test Slurm runs its daemons as root" 77
    mkdir -p "$dir" && chmod 755 "$dir" || die "cannot create $dir"
    install_missing "$dir"
    host=$(hostname -s)
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
    chown munge: "$dir/munge" 2>/dev/null && chmod 755 "$dir/munge" || die "no munge user (is munge installed?)" 77
    # A fresh key: no other munged can vouch for this cluster's credentials.
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none && chown munge: "$dir/munge/munge.key" &&
        chmod 400 "$dir/munge/munge.key" || die "cannot write the munge key"
    launch "$dir" munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F --key-file="$dir/munge/munge.key" \
        --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" \
        --log-file="$dir/munge/munged.log"
    for _ in $(seq 1 100); do [ -S "$dir/munge/munge.socket" ] && break; sleep 0.05; done
    [ -S "$dir/munge/munge.socket" ] || { stop "$dir"; die "munged did not start: $(tail -3 "$dir/munged.out" "$dir/munge/munged.log" 2>/dev/null)" 77; }
    cat >"$dir/slurm.conf" <<EOF
ClusterName=tptest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
    # Slurm's PMIx plugin creates each step's client directory TmpFS/spmix_appdir_<uid>_<job>.<step> (TmpFS is
    # /tmp) and fails the step when it exists; every private Slurm numbers its jobs from 1, so one running beside,
    # or a step of an earlier one that was killed, failed a step here ("aborted before step completely launched").
    mkdir -p "$dir/pmix-cli" || die "cannot create $dir/pmix-cli"
    echo "PMIxCliTmpDirBase=$dir/pmix-cli" >"$dir/mpi.conf"
    export SLURM_CONF=$dir/slurm.conf
    launch "$dir" slurmctld /usr/sbin/slurmctld -D -i -f "$SLURM_CONF"
    launch "$dir" slurmd /usr/sbin/slurmd -D -f "$SLURM_CONF"
    # The node reports in within a few seconds; 30 s bounds a daemon that never does.
    for _ in $(seq 1 300); do
        [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ] && { echo "export SLURM_CONF=$SLURM_CONF"; return 0; }
        kill -0 "$(cat "$dir/slurmctld.started")" 2>/dev/null && kill -0 "$(cat "$dir/slurmd.started")" 2>/dev/null || break
        sleep 0.1
    done
    local why
    why=$(tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/slurmctld.out" "$dir/slurmd.out" 2>/dev/null)
    stop "$dir"
    die "the node did not become idle within 30 s: $why" 77
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: $0 start DIR"; start "$2" ;;
stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 start DIR | stop DIR" 2 ;;
esac
