#!/bin/bash
# docs/ENVIRONMENT.md must hold exactly the table the code declares (regenerate: make update-env-doc).
doc="$(dirname "$0")/../docs/ENVIRONMENT.md"
want=$(./tests/config_doc) || exit 1
have=$(sed -n '/<!-- env-table:begin -->/,/<!-- env-table:end -->/p' "$doc" | sed '1d;$d')
if [ "$want" != "$have" ]; then
    echo "FAIL: docs/ENVIRONMENT.md's table differs from runtime/runtime_config.c's (run make update-env-doc):"
    diff <(echo "$have") <(echo "$want")
    exit 1
fi
echo "ok: docs/ENVIRONMENT.md matches the configuration table"
