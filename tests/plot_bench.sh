#!/bin/sh
# scripts/plot_bench.py: it reads the three forms the benchmarks print (coll_bench.sh's tables, JSON rows, tp-bench's
# plain table) into the right rows and writes a PNG; bad input is one line naming it. Skips without matplotlib.
src=${srcdir:-.}
PLOT="$src/scripts/plot_bench.py"
D="$src/tests"
# the first python3 with matplotlib: PATH's, else Debian's (python3-matplotlib) where PATH has another (pyenv)
PY=
for p in python3 /usr/bin/python3; do
    "$p" -c 'import matplotlib' 2>/dev/null && { PY=$p; break; }
done
[ -n "$PY" ] || { echo "SKIP: matplotlib not installed (scripts/install-deps.sh)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/plot_bench.XXXXXX")
trap 'rm -rf "$T"' EXIT
st=0
fail() { echo "FAIL: $*"; st=1; }

# What each form parses to: every implementation's p50 at its size, "not run" left out, the ranks of each table.
"$PY" - "$src/scripts" "$D" <<'PY' || st=1
import sys
sys.path.insert(0, sys.argv[1])
import plot_bench as pb
d = sys.argv[2]
md = pb.parse(open(d + "/plot_bench_sample.md").read(), "md")
def want(rows, row, what):
    if row not in rows:
        print("FAIL: %s: %r not among %d rows" % (what, row, len(rows)))
        sys.exit(1)
want(md, ("tprun-shm", 2, "allgather", 4 << 20, 420.0), "markdown shm table")
want(md, ("ompi-vader", 2, "allreduce", 64 << 10, 21.7), "markdown shm table, peer column")
want(md, ("tprun-tcp", 2, "allreduce", 16, 12.2), "markdown tcp table")
want(md, ("mpich", 2, "allgather", 4 << 20, 991.8), "markdown mpich column")
want(md, ("tprun-tcp", 4, "allreduce", 16, 53.3), "markdown 4-rank table")
if [r[:4] for r in md].count(("mpich", 2, "allreduce", 4 << 20)) != 1:
    print("FAIL: the tcp table's 'not run' mpich cell became a row"); sys.exit(1)
if len(md) != 37:
    print("FAIL: markdown: %d rows, expected 37 (6 rows x 3 columns x 2 tables - 1 not run, + 2)" % len(md)); sys.exit(1)
js = pb.parse(open(d + "/plot_bench_sample.jsonl").read(), "json")
want(js, ("ompi-tcp", 2, "allreduce", 1 << 20, 420.3), "JSON rows")
pl = pb.parse(open(d + "/plot_bench_sample.txt").read(), "plain")
if pl != [("tprun", 2, "allreduce", 16, 12.2), ("tprun", 2, "allreduce", 4 << 20, 1610.0)]:
    print("FAIL: tp-bench's plain table parsed to %r" % pl); sys.exit(1)
print("ok: the three forms parse to their rows")
PY

# A PNG comes out of all three inputs together, and of the 4-rank table alone.
"$PY" "$PLOT" -o "$T/all.png" --title "sample" "$D/plot_bench_sample.md" "$D/plot_bench_sample.jsonl" "$D/plot_bench_sample.txt" \
    >"$T/out" 2>&1 || fail "plot of the samples failed: $(cat "$T/out")"
magic=$(head -c 8 "$T/all.png" 2>/dev/null | od -An -c | tr -d ' \n')
[ "$magic" = '211PNG\r\n032\n' ] || fail "$T/all.png is not a PNG (starts $magic)"
[ "$(wc -c <"$T/all.png")" -gt 20000 ] || fail "$T/all.png is only $(wc -c <"$T/all.png") bytes"
"$PY" "$PLOT" -o "$T/four.png" --ranks 4 "$D/plot_bench_sample.md" >"$T/out" 2>&1 && [ -s "$T/four.png" ] ||
    fail "--ranks 4: $(cat "$T/out")"

# Bad input: one line that names it, status 1, no PNG.
bad() { # WANT ARGS...
    want=$1
    shift
    "$PY" "$PLOT" -o "$T/bad.png" "$@" >"$T/out" 2>&1
    got=$?
    [ "$got" = 1 ] || fail "plot_bench.py $*: status $got, expected 1"
    [ "$(cat "$T/out")" = "$want" ] || fail "plot_bench.py $*: said '$(cat "$T/out")', expected '$want'"
    [ -e "$T/bad.png" ] && fail "plot_bench.py $*: wrote a PNG"
    rm -f "$T/bad.png"
}
echo "no rows here" >"$T/empty.txt"
bad "plot_bench.py: $T/empty.txt: no benchmark rows (expected tp-bench or coll_bench.sh output, JSON or tables)" \
    "$T/empty.txt"
bad "plot_bench.py: cannot read $T/none.md: No such file or directory" "$T/none.md"
bad "plot_bench.py: --ops: bcast not in the input (it has allgather,allreduce)" --ops bcast "$D/plot_bench_sample.md"
bad "plot_bench.py: no rows at 3 ranks in the input" --ranks 3 "$D/plot_bench_sample.md"
echo '{"impl":"x","op":"allreduce"}' >"$T/cut.jsonl"
bad "plot_bench.py: $T/cut.jsonl line 1: a JSON row without impl, ranks, op, bytes and p50_us ('ranks')" "$T/cut.jsonl"
[ $st = 0 ] && echo "ok: PNGs written, bad input refused"
exit $st
