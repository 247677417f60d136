#!/bin/bash
# stream_drivers.sh: the CUDA and HIP devices against fake drivers on LD_LIBRARY_PATH (tests/fake_libcuda.c,
# tests/fake_libamdhip64.c): a CUDA driver older than 12.0, no device, a device that cannot wait on 64-bit stream
# values (each refused by name at tp_stream_create), and a capable one (streams, device memory, the dispatcher's
# refusals; HIP: reduce refused by name).
set -u
T=$(mktemp -d "${TMPDIR:-/tmp}/stream_drivers.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
build() { # build DIR SONAME SOURCE [FLAGS]
    mkdir -p "$T/$1"
    if ! ${CC:-cc} -shared -fPIC $4 -o "$T/$1/$2" "${srcdir:-.}/tests/$3" 2>"$T/cc.err"; then
        echo "FAIL: cannot build the fake $2: $(head -3 "$T/cc.err")"
        exit 1
    fi
}
build cuda libcuda.so.1 fake_libcuda.c ""
build cuda-old libcuda.so.1 fake_libcuda.c -DFAKE_CUDA_OLD
build hip libamdhip64.so.7 fake_libamdhip64.c ""
run() { # run DIR MODE-VARIABLE MODE EXPECT-VARIABLE EXPECT: stream_unit must pass with DIR's fake driver
    if env "$2=$3" "$4=$5" LD_LIBRARY_PATH="$T/$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ./tests/stream_unit \
        >"$T/out" 2>&1; then
        echo "ok: $1, $3: $5"
    else
        echo "FAIL: $1, $3 (expected \"$5\"):"
        grep -E "^FAIL|stream_unit" "$T/out" | head -10
        fails=$((fails + 1))
    fi
}
run cuda-old FAKE_CUDA_MODE ok STREAM_UNIT_CUDA "older than 12.0"
run cuda FAKE_CUDA_MODE nodevice STREAM_UNIT_CUDA "no CUDA device on this host"
run cuda FAKE_CUDA_MODE nomemops STREAM_UNIT_CUDA \
    "CUDA device 0 (Fake GPU, driver 13.0) cannot wait on a 64-bit stream value"
run cuda FAKE_CUDA_MODE ok STREAM_UNIT_CUDA ok
run hip FAKE_HIP_MODE nodevice STREAM_UNIT_HIP "no HIP device on this host"
run hip FAKE_HIP_MODE nowait STREAM_UNIT_HIP "HIP device 0 cannot wait on a 64-bit stream value"
run hip FAKE_HIP_MODE ok STREAM_UNIT_HIP ok
exit $((fails > 0))
