#!/usr/bin/env bash
# Prometheus (server and promtool) from Debian for the metrics tests: tests/e2e/test_metrics_prometheus.py
# starts its own server with its own config, port and storage dir; promtool checks deploy/prometheus/.
# Nothing here is configured or started. Idempotent; run as root by scripts/setup.sh ($1, the venv, unused).
set -euo pipefail
if ! dpkg -s prometheus >/dev/null 2>&1; then
  apt-get update -qq
  # policy-rc.d 101: the package's maintainer scripts must not start a site-wide Prometheus here.
  policy=/usr/sbin/policy-rc.d
  created_policy=no
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && created_policy=yes
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || status=$?
  [ "$created_policy" = yes ] && rm -f "$policy"
  [ "${status:-0}" -eq 0 ] || exit "$status"
fi
for program in prometheus promtool; do
  command -v "$program" >/dev/null || { echo "prometheus.sh: $program missing after install" >&2; exit 1; }
done
echo "prometheus.sh: ready: $(prometheus --version 2>&1 | head -1)"
