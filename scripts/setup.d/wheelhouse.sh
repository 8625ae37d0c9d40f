#!/usr/bin/env bash
# A wheelhouse of the product's dependencies at constraints.txt's versions.
#   wheelhouse.sh VENV                 (scripts/setup.sh) in VENV/wheelhouse, with the coordinator extra:
#       tests/deploy/test_ansible.py installs the roles' virtualenvs from it with no index
#       (vnode_common_wheelhouse), as a site without an index would, instead of fetching ~90 MB from PyPI.
#   wheelhouse.sh VENV DIR EXTRAS      (make dist, scripts/dist.py) one released form in DIR: EXTRAS ""
#       for a storage or compute node, "coordinator" for the coordinator host. With
#       VNODE_WHEELHOUSE_LINKS=DIR2, the wheels come from DIR2 (setup's wheelhouse) and no index is asked.
# Rebuilt whole when pyproject.toml or constraints.txt changes or the extras differ, so it holds one
# version of each and nothing another form needs. Idempotent.
set -euo pipefail
venv="$1"
repo=$(cd "$(dirname "$0")/../.." && pwd)
wheelhouse="${2:-$venv/wheelhouse}"
extras="${3-coordinator}"
stamp="$wheelhouse/.built"   # holds the extras it was built with
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$extras" ] \
   || [ "$repo/pyproject.toml" -nt "$stamp" ] || [ "$repo/constraints.txt" -nt "$stamp" ]; then
  rm -rf "$wheelhouse"
  mkdir -p "$wheelhouse"
  requirements="$wheelhouse/.requirements.txt"
  "$venv/bin/python" -c '
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = [e for e in sys.argv[2].split(",") if e]
print("\n".join(project["dependencies"] + [r for e in extras for r in project["optional-dependencies"][e]]))' \
    "$repo/pyproject.toml" "$extras" > "$requirements"
  links=()
  [ -z "${VNODE_WHEELHOUSE_LINKS:-}" ] || links=(--no-index --find-links "$VNODE_WHEELHOUSE_LINKS")
  # pip wheel, not pip download: a dependency published only as an sdist (pure-sasl) is built here once.
  "$venv/bin/pip" wheel -q --disable-pip-version-check -w "$wheelhouse" -c "$repo/constraints.txt" \
    "${links[@]}" -r "$requirements"
  echo "$extras" > "$stamp"
fi
echo "wheelhouse.sh: ready: $(ls "$wheelhouse"/*.whl | wc -l) wheels in $wheelhouse"
