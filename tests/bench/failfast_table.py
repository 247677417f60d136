#!/usr/bin/env python3
"""failfast_table.py: one markdown table per failure from bench_failfast's result lines (ms after the failure)."""
import collections
import statistics
import sys

FIELDS = ["label", "n", "signal", "rep", "gone", "launcher", "victim", "hung", "victim_left", "status",
          "launcher_ok", "right", "wrong", "named"]


def fmt(values):
    return ("%.1f" % statistics.median(values), "%.1f" % max(values)) if values else ("-", "-")


def main():
    groups = collections.OrderedDict()
    failed_starts = collections.Counter()
    for line in open(sys.argv[1]):
        cols = line.rstrip("\n").split("\t")
        if len(cols) == 5 and cols[4] == "start-failed":
            failed_starts[(cols[2], cols[0], int(cols[1]))] += 1
            continue
        if len(cols) != len(FIELDS):
            continue
        r = dict(zip(FIELDS, cols))
        groups.setdefault(r["signal"], collections.OrderedDict()).setdefault((r["label"], int(r["n"])), []).append(r)
    for signal, cases in groups.items():
        print("### SIG%s to rank 1\n" % signal)
        print("| launcher | N | runs | peers gone median | peers gone worst | launcher exit median | launcher exit worst"
              " | victim gone median | peers gone after victim, median | named correctly | exit statuses seen | hangs | victim left |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for (label, n), rows in sorted(cases.items(), key=lambda kv: kv[0][1]):
            ok = [r for r in rows if r["hung"] == "0"]
            gone = fmt([float(r["gone"]) for r in ok])
            launcher = fmt([float(r["launcher"]) for r in ok if float(r["launcher"]) >= 0])
            victim = fmt([float(r["victim"]) for r in rows if float(r["victim"]) >= 0])
            after = fmt([float(r["gone"]) - float(r["victim"]) for r in ok if float(r["victim"]) >= 0])
            statuses = collections.Counter(r["status"] for r in rows)
            seen = ", ".join("%s ×%d" % (s, k) if len(statuses) > 1 else s for s, k in statuses.most_common())
            runs = "%d" % len(rows)
            if failed_starts[(signal, label, n)]:
                runs += " (+%d failed to start)" % failed_starts[(signal, label, n)]
            named = "%d/%d" % (sum(r["named"] == "1" for r in rows), len(rows))
            print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |" % (
                label, n, runs, gone[0], gone[1], launcher[0], launcher[1], victim[0], after[0], named, seen,
                sum(r["hung"] == "1" for r in rows), sum(r["victim_left"] == "1" for r in rows)))
        print()


if __name__ == "__main__":
    main()
