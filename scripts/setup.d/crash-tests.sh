#!/usr/bin/env bash
# The crash tests: Debian's strace kills a step at each syscall that writes state (testbed/crash_points.py);
# dmsetup builds the dm-flakey device of the spool's power-loss test in the cgroup-v2 guest (the guest's
# kernel has dm-flakey; this host's has not). Run as root by scripts/setup.sh ($1 = venv, unused here).
set -euo pipefail
packages=(strace dmsetup e2fsprogs)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v strace >/dev/null || { echo "crash-tests.sh: strace missing" >&2; exit 1; }
