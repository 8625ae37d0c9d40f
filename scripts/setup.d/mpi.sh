#!/usr/bin/env bash
# MPI-IO benchmark dependencies: Open MPI, mpi4py and matplotlib (the emulated disk is
# testbed/paced_disk.py: no compiler or libfuse needed).
# Idempotent; run as root by scripts/setup.sh. Venv: $1, else $VNODE_VENV, else the repo's .venv.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:-${VNODE_VENV:-$repo/.venv}}"

wanted=(openmpi-bin libopenmpi-dev e2fsprogs)
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "mpi.sh: installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "mpi.sh: no virtualenv at $venv (pass its path as \$1 or VNODE_VENV)" >&2
    exit 1
fi
if ! "$venv/bin/python" -c "import mpi4py, matplotlib" 2>/dev/null; then
    # mpi4py builds against the system MPI: mpicc must be on PATH (from libopenmpi-dev).
    "$venv/bin/pip" install -q --disable-pip-version-check -c "$repo/constraints.txt" -e "$repo[bench]"
fi
"$venv/bin/python" -c "from mpi4py import MPI; import matplotlib; print('mpi.sh: ok,', MPI.Get_library_version().splitlines()[0])"
