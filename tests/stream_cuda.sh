#!/bin/bash
# stream_cuda.sh: the CUDA device against fake libcuda.so.1 builds (tests/fake_libcuda.c) on LD_LIBRARY_PATH: a
# driver older than CUDA 12, no device, a device that cannot wait on 64-bit stream values (each refused by name at
# tp_stream_create), and a capable one (streams, device memory, the dispatcher's refusals).
set -u
T=$(mktemp -d "${TMPDIR:-/tmp}/stream_cuda.XXXXXX")
trap 'rm -rf "$T"' EXIT
src=${srcdir:-.}/tests/fake_libcuda.c
fails=0
mkdir -p "$T/new" "$T/old"
for v in new old; do
    flags=""
    [ $v = old ] && flags=-DFAKE_CUDA_OLD
    if ! ${CC:-cc} -shared -fPIC $flags -o "$T/$v/libcuda.so.1" "$src" 2>"$T/cc.err"; then
        echo "FAIL: cannot build the fake libcuda.so.1: $(head -3 "$T/cc.err")"
        exit 1
    fi
done
run() { # run DIR MODE EXPECT: stream_unit must pass with the fake driver of DIR in MODE
    if FAKE_CUDA_MODE=$2 LD_LIBRARY_PATH="$T/$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ./tests/stream_unit "$3" >"$T/out" 2>&1; then
        echo "ok: $1 driver, mode $2: $3"
    else
        echo "FAIL: $1 driver, mode $2 (expected \"$3\"):"
        grep -E "^FAIL|stream_unit" "$T/out" | head -10
        fails=$((fails + 1))
    fi
}
run old ok "older than 12.0"
run new nodevice "no CUDA device on this host"
run new nomemops "CUDA device 0 (Fake GPU, driver 13.0) cannot wait on a 64-bit stream value"
run new ok ok
exit $((fails > 0))
