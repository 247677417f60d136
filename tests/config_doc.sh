#!/bin/bash
# docs/ENVIRONMENT.md must hold exactly the tables the registered components declare (regenerate: make update-env-doc).
doc="$(dirname "$0")/../docs/ENVIRONMENT.md"
want=$(./tests/config_doc) || exit 1
have=$(sed -n '/<!-- env-table:begin -->/,/<!-- env-table:end -->/p' "$doc" | sed '1d;$d')
if [ "$want" != "$have" ]; then
    echo "FAIL: docs/ENVIRONMENT.md's tables differ from the components' (runtime/runtime_components.c; run make update-env-doc):"
    diff <(echo "$have") <(echo "$want")
    exit 1
fi
echo "ok: docs/ENVIRONMENT.md matches the configuration table"
