#!/bin/sh
# fuzz.sh SRCDIR MANIFEST OUTDIR: builds every harness the manifest lists with $CC_FUZZ -fsanitize=fuzzer,address,
# undefined and runs each for $FUZZ_SECONDS on a copy of its committed corpus. Exits 1 naming the input of any
# crash, leak or hang; 0 with a message (skipped) when the compiler has no libFuzzer.
set -u
srcdir=$1 manifest=$2 out=$3
cc=${CC_FUZZ:-clang}
seconds=${FUZZ_SECONDS:-30}
targets=${FUZZ_TARGETS:-}
flags="-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all"
mkdir -p "$out/obj" || exit 1

probe=$out/probe.c
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return (int)(d == 0) + (int)n * 0; }\n' > "$probe"
if ! $cc $flags -fsanitize=fuzzer -o "$out/probe" "$probe" > "$out/probe.log" 2>&1; then
    echo "make fuzz: skipped: $cc cannot build libFuzzer programs ($(head -n 1 "$out/probe.log"));" \
         "install clang and libclang-rt-14-dev (scripts/install-deps.sh) or set CC_FUZZ"
    exit 0
fi

cppflags=$(sed -n 's/^cppflags //p' "$manifest")
# The newest header: an object older than it is rebuilt (headers are not tracked one by one).
newest_h=$(ls -t $(find "$srcdir/include" "$srcdir/runtime" "$srcdir/launcher" "$srcdir/transports" "$srcdir/tests/fuzz" \
    -name '*.h') | head -n 1)

# Compiles a source into an object under $out/obj/NAME/; prints the object's path.
compile() {
    src=$1 dir=$out/obj/$2
    obj=$dir/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')
    mkdir -p "$dir"
    if [ ! -f "$obj" ] || [ "$srcdir/$src" -nt "$obj" ] || [ "$newest_h" -nt "$obj" ]; then
        $cc $flags -fsanitize=fuzzer-no-link $cppflags -std=gnu11 -pthread -c "$srcdir/$src" -o "$obj" >&2 || return 1
    fi
    echo "$obj"
}

# Each library once: libtp's sources, and tprun's without its main.
for lib in $(sed -n 's/^lib \([^ ]*\) .*/\1/p' "$manifest"); do
    objs=
    for src in $(sed -n "s/^lib $lib //p" "$manifest"); do
        case $src in *.c) o=$(compile "$src" "$lib") || exit 1; objs="$objs $o" ;; esac
    done
    rm -f "$out/lib$lib.a"
    ar rcs "$out/lib$lib.a" $objs || exit 1
done

# Sanitizer reports stop the run, with stacks; known harmless leaks are listed in tests/lsan.supp.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$srcdir/tests/lsan.supp}
export UBSAN_OPTIONS LSAN_OPTIONS
failed=
while read -r kind name lib sources; do
    [ "$kind" = harness ] || continue
    if [ -n "$targets" ]; then
        case " $targets " in *" $name "*) ;; *) continue ;; esac
    fi
    objs=
    for src in $sources; do
        case $src in */replay_main.c | *.h) ;; *.c) o=$(compile "$src" "$name") || exit 1; objs="$objs $o" ;; esac
    done
    bin=$out/fuzz_$name
    $cc $flags -fsanitize=fuzzer -pthread -o "$bin" $objs "$out/lib$lib.a" -lm -ldl || exit 1
    work=$out/$name
    rm -rf "$work/corpus"
    mkdir -p "$work/corpus" "$work/artifacts"
    cp "$srcdir/tests/fuzz/corpus/$name"/* "$work/corpus/" 2>/dev/null
    dict=
    [ -f "$srcdir/tests/fuzz/dict/$name.dict" ] && dict=-dict=$srcdir/tests/fuzz/dict/$name.dict
    # Inputs may grow past the parsers' buffers (libFuzzer would otherwise stop at the largest seed): record lines
    # of 2 KiB, the 64 KiB chunks in which the agent and tprun read their channels.
    case $name in
    plan | agent_line) max_len=262144 ;;
    record | boot | args | config | env | fence) max_len=16384 ;;
    *) max_len=4096 ;;
    esac
    echo "make fuzz: $name for $seconds s (log: $work/fuzz.log)"
    # Its own output (the code under test logs) is closed: libFuzzer and the sanitizers report on their own fd.
    if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=3 -print_final_stats=1 -max_len=$max_len -len_control=0 \
        -artifact_prefix="$work/artifacts/" $dict ${FUZZ_ARGS:-} "$work/corpus" > "$work/fuzz.log" 2>&1; then
        grep -E '^#[0-9]+.*(DONE|pulse)' "$work/fuzz.log" | tail -n 1
    else
        grep -E 'ERROR: |SUMMARY: |Test unit written' "$work/fuzz.log" | head -n 5
        for f in "$work"/artifacts/*; do
            [ -f "$f" ] && echo "make fuzz: $name: failing input $f (replay: tests/fuzz/fuzz_$name $f)"
        done
        failed="$failed $name"
    fi
done < "$manifest"
if [ -n "$failed" ]; then
    echo "make fuzz: FAILED:$failed (inputs and logs under $out)"
    exit 1
fi
echo "make fuzz: every harness ran $seconds s without a crash, leak or hang"
