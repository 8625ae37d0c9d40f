#!/usr/bin/env bash
# deploy/ansible needs ansible-playbook (Debian's ansible-core) to run its roles and their test.
# Receives the venv path as $1 (unused: Ansible runs from the system, as a site would run it).
set -euo pipefail
if ! command -v ansible-playbook >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ansible-core >/dev/null
fi
