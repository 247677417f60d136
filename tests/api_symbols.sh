#!/bin/bash
# api_symbols.sh: libtp.so exports exactly the functions that include/tp.h and include/tp_provider.h declare, no
# internal symbol and no declared function missing (a declaration without TP_API is not exported); the headers'
# static inline helpers (tp_put_le32, ...) are not the library's.
set -u
LIB=${TP_LIB:-${builddir:-.}/.libs/libtp.so}
INCLUDE=${TP_INCLUDE:-${srcdir:-.}/include}
T=$(mktemp -d "${TMPDIR:-/tmp}/api_symbols.XXXXXX")
trap 'rm -rf "$T"' EXIT

if [ ! -f "$LIB" ]; then
    echo "SKIP: $LIB not built (configured with --disable-shared?)"
    exit 77
fi

# The declarations as the compiler sees them: GCC's -aux-info lists every prototype with its file and line.
aux() { ${1} -fsyntax-only -std=gnu11 -I"$INCLUDE" -aux-info "$T/aux" -x c "$INCLUDE/tp_provider.h" 2>"$T/aux.err"; }
aux "${CC:-gcc}" || aux gcc || {
    echo "FAIL: cannot list the headers' declarations: ${CC:-gcc} -aux-info: $(head -1 "$T/aux.err") (needs GCC)"
    exit 1
}
grep -E '^/\* [^ ]*include/tp(_provider)?\.h:' "$T/aux" | grep -v '\*/ static ' |
    sed -E 's/^[^*]*\*\/ *//; s/ *\(.*//; s/.*[ *]//' | sort -u >"$T/declared"
# Everything libtp.so defines in its dynamic symbol table, but the linker's own markers.
nm -D --defined-only "$LIB" | awk '{print $NF}' | grep -vxE '_init|_fini|_edata|_end|__bss_start' |
    sed 's/@.*//' | sort -u >"$T/exported"

n=$(wc -l <"$T/declared")
if [ "$n" -lt 20 ]; then
    echo "FAIL: only $n functions found in $INCLUDE/tp.h and tp_provider.h: the header parse is broken"
    exit 1
fi
extra=$(comm -13 "$T/declared" "$T/exported" | tr '\n' ' ')
missing=$(comm -23 "$T/declared" "$T/exported" | tr '\n' ' ')
fails=0
if [ -n "$extra" ]; then
    echo "FAIL: $LIB exports symbols that tp.h and tp_provider.h do not declare: $extra"
    echo "  (internal functions stay hidden: libtp is built with -fvisibility=hidden; do not mark them TP_API)"
    fails=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: tp.h or tp_provider.h declares functions that $LIB does not export: $missing"
    echo "  (start each declaration with TP_API, and define the function in libtp)"
    fails=1
fi
[ "$fails" -eq 0 ] && echo "ok: $LIB exports exactly the $n functions of tp.h and tp_provider.h"
exit "$fails"
