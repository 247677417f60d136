#!/bin/sh
# Jobs at once on one host: each its own bootstrap port and job id, all succeed (no fixed port anywhere).
. "$(dirname "$0")/launcher_lib.sh"

jobs=6
i=0
while [ $i -lt $jobs ]; do
    "$TPRUN" -n 4 "$RANKP" '*:env,sleep=200' >"$T/out$i" 2>"$T/err$i" &
    eval "pid$i=\$!"
    i=$((i + 1))
done
i=0
while [ $i -lt $jobs ]; do
    eval "wait \$pid$i"
    expect_eq "job $i status" "$?" 0
    grep '^0 TP_BOOT_ADDR=' "$T/out$i" >>"$T/addrs"
    grep '^0 TP_JOB_ID=' "$T/out$i" >>"$T/ids"
    grep '^0 TP_JOB_KEY=' "$T/out$i" >>"$T/keys"
    i=$((i + 1))
done
expect_eq "distinct ports" "$(sort -u "$T/addrs" | wc -l)" $jobs
expect_eq "distinct job ids" "$(sort -u "$T/ids" | wc -l)" $jobs
expect_eq "distinct keys" "$(sort -u "$T/keys" | wc -l)" $jobs
finish
