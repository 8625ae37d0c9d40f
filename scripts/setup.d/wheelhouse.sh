#!/usr/bin/env bash
# A wheelhouse of the product's dependencies at constraints.txt's versions, in $1/wheelhouse (beside the
# venv it matches): tests/deploy/test_ansible.py installs the roles' virtualenv from it with no index
# (vnode_common_wheelhouse), as a site without an index would, instead of fetching ~90 MB from PyPI on
# every run. Rebuilt whole when pyproject.toml or constraints.txt changes, so it holds one version of each.
# Idempotent; run as root by scripts/setup.sh ($1, the venv).
set -euo pipefail
venv="$1"
repo=$(cd "$(dirname "$0")/../.." && pwd)
wheelhouse="$venv/wheelhouse"
stamp="$wheelhouse/.built"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ] || [ "$repo/constraints.txt" -nt "$stamp" ]; then
  rm -rf "$wheelhouse"
  mkdir -p "$wheelhouse"
  requirements="$wheelhouse/.requirements.txt"
  "$venv/bin/python" -c 'import sys, tomllib; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$repo/pyproject.toml" > "$requirements"
  # pip wheel, not pip download: a dependency published only as an sdist (pure-sasl) is built here once.
  "$venv/bin/pip" wheel -q --disable-pip-version-check -w "$wheelhouse" -c "$repo/constraints.txt" -r "$requirements"
  touch "$stamp"
fi
echo "wheelhouse.sh: ready: $(ls "$wheelhouse"/*.whl | wc -l) wheels in $wheelhouse"
