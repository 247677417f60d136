#!/bin/sh
# layers.sh: the layering rules of docs/ARCHITECTURE.md hold in the source tree (tests/layers.py).
exec python3 "${srcdir:-.}/tests/layers.py" "${srcdir:-.}"
