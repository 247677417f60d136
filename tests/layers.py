#!/usr/bin/env python3
"""layers.py: the tree's layering rules (docs/ARCHITECTURE.md): no include circles within a folder tree, transports
and devices see only the public headers and their own folder, launcher/main.c stays small. Prints each breach."""
import os
import re
import sys

LAYERS = ["launcher", "runtime", "transports", "devices"]
PUBLIC = {"tp.h", "tp_provider.h"}
MAIN_MAX_LINES = 200


def sources(top):
    for d, _, files in os.walk(top):
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.join(d, f)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), flags=re.M)


def cycles(root, layer):
    """Module-level circles (x.c and x.h are one module) among the files under layer."""
    files = list(sources(os.path.join(root, layer)))
    by_name = {}
    for f in files:
        rel = os.path.relpath(f, os.path.join(root, layer))
        by_name.setdefault(os.path.basename(f), []).append(f)
        by_name.setdefault(rel, []).append(f)
    module = lambda p: os.path.splitext(os.path.relpath(p, root))[0]
    graph = {}
    for f in files:
        for inc in includes(f):
            for target in by_name.get(inc, []):
                if module(target) != module(f):
                    graph.setdefault(module(f), set()).add(module(target))
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    breaches = []
    for layer in LAYERS:
        for comp in cycles(root, layer):
            breaches.append("%s/: these include each other in a circle: %s" % (layer, " ".join(comp)))
    for layer in ("transports", "devices"):
        for f in sources(os.path.join(root, layer)):
            own = {os.path.basename(g) for g in sources(os.path.dirname(f))}
            for inc in includes(f):
                # A component's TP_* table (<name>_config.c, data tprun links) may use the table entry's type.
                table = f.endswith("_config.c") and inc == "runtime_config_entry.h"
                if inc not in PUBLIC and os.path.basename(inc) not in own and not table:
                    breaches.append("%s includes %s: a component sees only tp.h, tp_provider.h and its own folder"
                                    % (os.path.relpath(f, root), inc))
    main_c = os.path.join(root, "launcher", "main.c")
    n = sum(1 for _ in open(main_c))
    if n >= MAIN_MAX_LINES:
        breaches.append("launcher/main.c has %d lines: main parses and runs the job (under %d)" % (n, MAIN_MAX_LINES))
    for b in breaches:
        print("FAIL: " + b)
    print("layers: %d breaches" % len(breaches))
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
