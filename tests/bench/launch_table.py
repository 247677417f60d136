#!/usr/bin/env python3
"""launch_table.py: merges the hyperfine rounds of launch.sh into one markdown table (ms, median / min)."""
import glob
import json
import os
import re
import statistics
import sys

HANG_CODES = (124, 137)
COLUMNS = [("forkn", "forkn /bin/true"), ("tprun-true", "tprun /bin/true"), ("hydra-true", "hydra /bin/true"),
           ("ompi-true", "ompi /bin/true"), ("tprun-boot", "tprun boot"), ("hydra-hello", "hydra hello"),
           ("ompi-hello", "ompi hello"), ("base-tprun-true", "base tprun /bin/true"),
           ("base-tprun-boot", "base tprun boot")]


def load(folder):
    cells = {}  # (n, name) -> {"times": [...], "hung": k, "failed": k, "runs": k}
    for path in sorted(glob.glob(os.path.join(folder, "r*-n*-*.json"))):
        n = int(re.search(r"-n(\d+)-", os.path.basename(path)).group(1))
        for res in json.load(open(path))["results"]:
            cell = cells.setdefault((n, res["command"]), {"times": [], "hung": 0, "failed": 0, "runs": 0})
            codes = res.get("exit_codes") or [0] * len(res["times"])
            for t, code in zip(res["times"], codes):
                cell["runs"] += 1
                if code == 0:
                    cell["times"].append(t * 1000)
                elif code in HANG_CODES:
                    cell["hung"] += 1
                else:
                    cell["failed"] += 1
    return cells


def show(cell):
    if cell is None:
        return "-"
    text = "%.1f / %.1f" % (statistics.median(cell["times"]), min(cell["times"])) if cell["times"] else "none"
    if cell["hung"]:
        text += " (%d/%d hung)" % (cell["hung"], cell["runs"])
    if cell["failed"]:
        text += " (%d/%d failed)" % (cell["failed"], cell["runs"])
    return text


def ratio(cells, a, b, n):
    ca, cb = cells.get((n, a)), cells.get((n, b))
    if not ca or not cb or not ca["times"] or not cb["times"]:
        return "-"
    return "%.2f" % (statistics.median(ca["times"]) / statistics.median(cb["times"]))


def main():
    folder = sys.argv[1]
    cells = load(folder)
    ns = sorted({n for n, _ in cells})
    base = any(name == "base-tprun-true" for _, name in cells)
    columns = [c for c in COLUMNS if base or not c[0].startswith("base-")]
    extra = " | tprun/base true | tprun/base boot" if base else ""
    print("| N | " + " | ".join(title for _, title in columns) + " | tprun/hydra true | tprun boot/hydra hello" + extra +
          " |")
    print("|---:" * (len(columns) + 3 + 2 * base) + "|")
    for n in ns:
        row = [str(n)] + [show(cells.get((n, name))) for name, _ in columns]
        row += [ratio(cells, "tprun-true", "hydra-true", n), ratio(cells, "tprun-boot", "hydra-hello", n)]
        if base:
            row += [ratio(cells, "tprun-true", "base-tprun-true", n), ratio(cells, "tprun-boot", "base-tprun-boot", n)]
        print("| " + " | ".join(row) + " |")
    runs = {name: sorted({c["runs"] for (n, nm), c in cells.items() if nm == name}) for name, _ in COLUMNS}
    print()
    print("Runs per cell: " + ", ".join("%s %s" % (name, "/".join(map(str, r))) for name, r in runs.items()) + ".")
    floor = [cells[(n, "timeout")] for n in ns if (n, "timeout") in cells]
    times = [t for c in floor for t in c["times"]]
    if times:
        print("`timeout -k 1 5 /bin/true` (the wrapper every launcher cell pays): median %.1f ms, min %.1f ms."
              % (statistics.median(times), min(times)))
    hangs = {name: sum(c["hung"] for (n, nm), c in cells.items() if nm == name) for name, _ in COLUMNS}
    print("Hangs (runs ended by timeout): " + ", ".join("%s %d" % kv for kv in hangs.items()) + ".")


if __name__ == "__main__":
    main()
