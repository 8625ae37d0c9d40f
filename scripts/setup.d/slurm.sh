#!/usr/bin/env bash
# Slurm and munge from Debian for the batch-hook tests, and slurmdbd with MariaDB's server and
# client cores for the Slurm-accounts tests (testbed.slurm and testbed.slurmdbd start them
# themselves, with their own munge key, configs, datadir and spool dirs; nothing here is
# configured or started, and the cores leave /var/lib/mysql and the init scripts alone).
# Idempotent; run as root by scripts/setup.sh, which passes the venv path as $1 (unused here).
set -euo pipefail
packages=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server-core mariadb-client-core)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  # policy-rc.d 101: Debian's maintainer scripts must not start daemons the tests start themselves.
  policy=/usr/sbin/policy-rc.d
  created_policy=no
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && created_policy=yes
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
  [ "$created_policy" = yes ] && rm -f "$policy"
  [ "${status:-0}" -eq 0 ] || exit "$status"
fi
for program in slurmctld slurmd munged sbatch slurmdbd sacctmgr mariadbd mariadb-install-db; do
  command -v "$program" >/dev/null || { echo "slurm.sh: $program missing after install" >&2; exit 1; }
done
