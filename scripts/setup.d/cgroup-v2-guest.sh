#!/usr/bin/env bash
# A real cgroup-v2 kernel for the io-v2 tests: Debian's qemu, guest kernel and busybox
# (testbed.cgroup_v2_guest boots it in software emulation; the host keeps its own kernel).
# Idempotent and quick when done; run as root by scripts/setup.sh ($1 = venv, unused here).
set -euo pipefail
packages=(qemu-system-x86 linux-image-amd64 busybox-static cpio)  # cpio packs the initramfs
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  # The guest kernel is only booted under qemu: no initramfs-tools/bootloader hooks are needed.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v qemu-system-x86_64 >/dev/null || { echo "cgroup-v2-guest.sh: qemu-system-x86_64 missing" >&2; exit 1; }
ls /boot/vmlinuz-* >/dev/null 2>&1 || { echo "cgroup-v2-guest.sh: no /boot/vmlinuz-*" >&2; exit 1; }
[ -x /bin/busybox ] || { echo "cgroup-v2-guest.sh: /bin/busybox missing" >&2; exit 1; }
