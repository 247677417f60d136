#!/bin/sh
# ab_build.sh LIBDIR OUT: builds examples/bench/ab_bench.c into OUT with mpicc.openmpi against LIBDIR's libtp.so
# (for tcp_bench.sh --same-process and tests/bench_args.sh). A libtp built with --enable-sanitizers needs ASan's
# runtime first in the program as well, so ab_bench then gets the same sanitizers.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
libs=$(cd "$1" && pwd)
san=
# the output captured, not piped into grep -q: a pipe can fail when grep stops reading at its first match
case $(ldd "$libs/libtp.so" 2>/dev/null || true) in *libasan*) san=-fsanitize=address,undefined ;; esac
# shellcheck disable=SC2086
exec mpicc.openmpi -O2 $san -I "$here/../../include" -o "$2" "$here/ab_bench.c" -L"$libs" -ltp -Wl,-rpath,"$libs"
