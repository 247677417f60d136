#!/bin/sh
# topo_rank.sh ROOTS PROGRAM ARGS...: runs a rank on the fake machine named by its host: TP_SYSFS_ROOT=ROOTS/TP_HOST,
# and TP_GPU_BUS_ID the GPU of its local rank in that machine's gpus list (none when the list is shorter).
roots=$1
shift
export TP_SYSFS_ROOT="$roots/$TP_HOST"
if [ -f "$TP_SYSFS_ROOT/gpus" ]; then
    g=$(sed -n "$((TP_LOCAL_RANK + 1))p" "$TP_SYSFS_ROOT/gpus")
    [ -n "$g" ] && export TP_GPU_BUS_ID="$g"
fi
exec "$@"
