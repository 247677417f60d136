#!/bin/sh
# machine.sh: the facts a benchmark table is read against: date, commit, cores, CPU, kernel, load.
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "commit: ${BENCH_COMMIT:-$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo unknown)}"
echo "nproc: $(nproc)"
echo "cpu: $(sed -n "s/^model name[[:space:]]*: //p" /proc/cpuinfo | sort -u), family $(sed -n "s/^cpu family[[:space:]]*: //p" /proc/cpuinfo | sort -u) model $(sed -n "s/^model[[:space:]]*: //p" /proc/cpuinfo | sort -u)"
echo "kernel: $(uname -sr)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
