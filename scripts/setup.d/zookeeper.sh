#!/usr/bin/env bash
# ZooKeeper from Debian for the coordinator's HA tests: testbed/zookeeper_ensemble.py starts its own
# three servers on loopback, each with its own config, ports and data dir. Only the `zookeeper`
# package (jars and scripts) is installed; `zookeeperd`, which runs a site-wide server, is not.
# Idempotent; run as root by scripts/setup.sh ($1, the venv, unused).
set -euo pipefail
if ! dpkg -s zookeeper >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
fi
jar=$(ls /usr/share/java/zookeeper.jar 2>/dev/null || true)
[ -n "$jar" ] || { echo "zookeeper.sh: /usr/share/java/zookeeper.jar missing after install" >&2; exit 1; }
echo "zookeeper.sh: ready: $(dpkg-query -W -f='${Version}' zookeeper)"
