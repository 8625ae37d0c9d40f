#!/usr/bin/env bash
# Install everything vnode-sync needs on a fresh Debian 12 machine (run as root; idempotent).
# The Python side goes into .venv in the repo; each scripts/setup.d/*.sh adds one area's needs
# (HDFS jars from Maven Central, Slurm and MPI from Debian) and receives the venv path as $1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

# One setup at a time on a machine: clones set up side by side (CI beside a developer's checkout)
# share apt's lock and /var/cache/vnode-sync, and apt refuses a second apt-get at once. flock -o
# keeps the lock in flock itself, so no daemon a package starts inherits it.
if [ -z "${VNODE_SETUP_LOCKED:-}" ]; then
  exec env VNODE_SETUP_LOCKED=1 flock -o /run/lock/vnode-sync-setup.lock bash "$0" "$@"
fi
venv="${VNODE_VENV:-$repo/.venv}"

apt_packages=(util-linux e2fsprogs iproute2 procps)
missing=()
for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# Ranges in pyproject.toml, exact versions from constraints.txt (the one pin list). The coordinator extra
# too: the suite runs the coordinator, which a storage node's install leaves out.
stamp="$venv/.vnode-sync-installed"
if [ ! -f "$stamp" ] || [ "$repo/pyproject.toml" -nt "$stamp" ] || [ "$repo/constraints.txt" -nt "$stamp" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check -c "$repo/constraints.txt" -e "$repo[test,testbed,coordinator]"
  touch "$stamp"
fi

# The repository's own lab packages (testbed/, benchmarks/) are importable in this venv from any
# directory, e.g. by benchmark scripts and daemons started elsewhere; they are not in the wheel.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$repo" > "$site/vnode-sync-lab.pth"

for fragment in "$repo"/scripts/setup.d/*.sh; do
  [ -e "$fragment" ] || continue
  bash "$fragment" "$venv"
done
