#!/bin/sh
# The environment contract: every variable with its per-rank value, TP_BOOT_FD only on rank 0 (a listening
# socket on TP_BOOT_ADDR's port), the job key never on a command line, torch variables (MASTER_PORT another
# port than the bootstrap's) and -x.
. "$(dirname "$0")/launcher_lib.sh"

n=4
RANK=77 TEST_Y=forwarded TP_RANK=9 TP_BOOT_FD=7 "$TPRUN" -n $n -x TEST_X=hello -x TEST_Y "$RANKP" '*:env' >"$T/out" 2>"$T/err"
expect_eq "status" "$?" 0
[ -s "$T/err" ] && fail "stderr not empty: $(cat "$T/err")"
get() { grep "^$1 $2=" "$T/out" | sed "s/^$1 $2=//"; }
addr=$(get 0 TP_BOOT_ADDR)
port=${addr#127.0.0.1:}
job=$(get 0 TP_JOB_ID)
key=$(get 0 TP_JOB_KEY)
case "$addr" in 127.0.0.1:[0-9]*) pass "TP_BOOT_ADDR $addr" ;; *) fail "TP_BOOT_ADDR '$addr'" ;; esac
# MASTER_PORT is the same on every rank and not the bootstrap's port: torch's TCPStore binds it in rank 0.
master=$(get 0 MASTER_PORT)
case "$master" in [1-9]*) [ "$master" != "$port" ] && pass "MASTER_PORT $master" || fail "MASTER_PORT is the bootstrap's port $port" ;;
*) fail "MASTER_PORT '$master'" ;; esac
echo "$key" | grep -Eq '^[0-9a-f]{32}$' || fail "TP_JOB_KEY is not 32 hex digits: '$key'"
echo "$job" | grep -Eq "^$(hostname)-[0-9]+-[0-9a-f]+$" || fail "TP_JOB_ID '$job' is not host-pid-hex"
r=0
while [ $r -lt $n ]; do
    for kv in TP_RANK=$r TP_WORLD_SIZE=$n TP_LOCAL_RANK=$r TP_LOCAL_WORLD_SIZE=$n TP_NODE_RANK=0 TP_JOB_ID=$job \
        TP_JOB_KEY=$key TP_BOOT_ADDR=$addr RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$master TEST_X=hello TEST_Y=forwarded key_in_cmdline=0 own_pgroup=1; do
        expect_eq "rank $r ${kv%%=*}" "$(get $r "${kv%%=*}")" "${kv#*=}"
    done
    if [ $r = 0 ]; then
        expect_eq "rank 0 TP_BOOT_FD" "$(get 0 TP_BOOT_FD)" 3
        expect_eq "rank 0 boot socket" "$(get 0 boot_socket)" listening-on-boot-port
        expect_eq "rank 0 holds one socket" "$(get 0 sockets)" 1
    else
        expect_eq "rank $r TP_BOOT_FD" "$(get $r TP_BOOT_FD)" "<unset>"
        expect_eq "rank $r holds no socket" "$(get $r sockets)" 0
    fi
    r=$((r + 1))
done
grep -q "$key" "$T/err" && fail "the job key appears in tprun's messages"

# Only rank 0 ever holds the listener: once it has ended, connecting is refused.
"$TPRUN" -n 3 "$RANKP" '0:exit=0' '*:refused' >"$T/out" 2>"$T/err"
expect_eq "listener gone with rank 0: rank 1" "$(get 1 boot_refused)" 1
expect_eq "listener gone with rank 0: rank 2" "$(get 2 boot_refused)" 1

# Without the torch variables, tprun leaves RANK and friends as they are.
RANK=77 "$TPRUN" -n 2 --no-torch-env "$RANKP" '*:env' >"$T/out" 2>"$T/err"
expect_eq "--no-torch-env status" "$?" 0
expect_eq "--no-torch-env RANK passes through" "$(get 1 RANK)" 77
expect_eq "--no-torch-env MASTER_PORT unset" "$(get 1 MASTER_PORT)" "<unset>"
expect_eq "--no-torch-env TP_RANK" "$(get 1 TP_RANK)" 1
TP_TORCH_ENV=0 "$TPRUN" -n 2 "$RANKP" '*:env' >"$T/out" 2>"$T/err"
expect_eq "TP_TORCH_ENV=0 WORLD_SIZE unset" "$(get 1 WORLD_SIZE)" "<unset>"

# The key is in no process's command line while the job runs (checked from outside too).
new_job_files
"$TPRUN" -n 2 "$RANKP" '*:env,pid,sleep=300' >"$out" 2>"$err" &
tp=$!
wait_for_lines "$out" 2 10 "^pid " || fail "ranks did not print"
key=$(get 0 TP_JOB_KEY)
for p in $tp $(sed -n 's/^pid //p' "$out"); do
    [ -r "/proc/$p/cmdline" ] && tr '\0' ' ' <"/proc/$p/cmdline" | grep -q "$key" && fail "key in /proc/$p/cmdline"
done
wait $tp
expect_eq "status (pid run)" "$?" 0
finish
