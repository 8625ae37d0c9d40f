"""A real cgroup-v2 kernel for tests: Debian's linux-image-amd64 booted under qemu in software
emulation (no KVM: this host's /dev/kvm hangs a stock kernel), with the host's root shared
read-only over 9p so the project's own virtualenv runs inside it (architecture.md, "A real
cgroup-v2 kernel on these machines"). Installed by scripts/setup.d/cgroup-v2-guest.sh.

The guest mounts cgroup2 (which offers io) and chroots into the host root, read-only, so a
checkout anywhere (also under /tmp) runs there; a writable exchange dir is on /mnt and a
tmpfs on /dev/shm is TMPDIR. It runs one shell command and powers off. A small virtio disk
is attached for io.max measurements; the command finds its MAJ:MIN in $GUEST_DISK_DEV.
"""

import glob
import gzip
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

CACHE = "/var/cache/vnode-sync/cgroup-v2-guest"
# Debian builds these as modules; insmod needs them in dependency order.
MODULES = ("virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci",
           "virtio_blk", "netfs", "fscache", "9pnet", "9pnet_virtio", "9p")
PREFIX = "vnode-sync-guest-"

INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in {modules}; do insmod /modules/$m.ko || echo "guest: insmod $m failed"; done
opts=trans=virtio,version=9p2000.L,msize=262144
mkdir -p /host && mount -t 9p -o $opts,ro,cache=loose hostroot /host
mount -t 9p -o $opts exchange /host/mnt
mount -t proc proc /host/proc; mount -t sysfs sys /host/sys; mount -t devtmpfs dev /host/dev
mkdir -p /host/dev/shm && mount -t tmpfs tmpfs /host/dev/shm
mount -t cgroup2 none /host/sys/fs/cgroup
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
echo "guest: booted $(cut -d' ' -f1 /proc/uptime)s"
GUEST_DISK_DEV=$(cat /sys/block/vda/dev) chroot /host /bin/sh -c \\
  'cd "$(cat /mnt/cwd)" && exec env HOME=/dev/shm TMPDIR=/dev/shm PYTHONDONTWRITEBYTECODE=1 GUEST_DISK_DEV='"$(cat /sys/block/vda/dev)"' /bin/sh /mnt/command.sh' \\
  > /host/mnt/output 2>&1
echo $? > /host/mnt/rc
sync
echo "guest: done"
echo o > /proc/sysrq-trigger
"""


@dataclass
class GuestResult:
    returncode: int | None   # None: the guest did not finish in time
    output: str              # what the command printed (stdout and stderr)
    console: str             # the guest kernel's and init's console
    boot_seconds: float      # host wall time until init printed "booted"
    total_seconds: float


def kernel_version() -> str | None:
    kernels = sorted(glob.glob("/boot/vmlinuz-*"))
    for path in reversed(kernels):
        version = path.removeprefix("/boot/vmlinuz-")
        if os.path.isdir(f"/lib/modules/{version}/kernel"):
            return version
    return None


def missing() -> str | None:
    """Why the guest cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (9p export of / and the guest's cgroups)"
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 missing (scripts/setup.d/cgroup-v2-guest.sh installs it)"
    if kernel_version() is None:
        return "no /boot/vmlinuz-* with /lib/modules (scripts/setup.d/cgroup-v2-guest.sh installs one)"
    if not os.path.exists("/bin/busybox"):
        return "/bin/busybox missing (busybox-static)"
    if not os.path.isdir("/mnt"):
        return "no /mnt on this host: the guest mounts its exchange dir there"
    return None


def _module_files(version: str) -> dict[str, str]:
    found = {}
    for dirpath, _, files in os.walk(f"/lib/modules/{version}/kernel"):
        for name in files:
            base = name.split(".ko")[0]
            if base in MODULES and ".ko" in name:
                found[base] = os.path.join(dirpath, name)
    absent = set(MODULES) - set(found)
    if absent:
        raise RuntimeError(f"guest kernel {version} lacks modules {sorted(absent)}")
    return found


def initramfs(version: str) -> str:
    """The busybox initramfs for `version`, built once and cached by content hash."""
    modules = _module_files(version)
    init = INIT.format(modules=" ".join(MODULES))
    digest = hashlib.sha256(init.encode())
    for path in ["/bin/busybox", *(modules[m] for m in MODULES)]:
        with open(path, "rb") as f:
            digest.update(hashlib.sha256(f.read()).digest())
    target = os.path.join(CACHE, f"initramfs-{version}-{digest.hexdigest()[:16]}.cpio.gz")
    if os.path.exists(target):
        return target
    os.makedirs(CACHE, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=PREFIX) as tree:
        for d in ("bin", "proc", "sys", "dev", "modules"):
            os.mkdir(os.path.join(tree, d))
        shutil.copy("/bin/busybox", os.path.join(tree, "bin/busybox"))
        for name, path in modules.items():
            data = open(path, "rb").read()
            if path.endswith(".xz"):
                import lzma
                data = lzma.decompress(data)
            elif path.endswith(".zst"):
                data = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
            with open(os.path.join(tree, "modules", name + ".ko"), "wb") as f:
                f.write(data)
        with open(os.path.join(tree, "init"), "w") as f:
            f.write(init)
        os.chmod(os.path.join(tree, "init"), 0o755)
        names = subprocess.run(["find", "."], cwd=tree, capture_output=True, text=True, check=True).stdout
        archive = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=tree, input=names.encode(),
                                 capture_output=True, check=True).stdout
        partial = target + f".{os.getpid()}"
        with gzip.open(partial, "wb", compresslevel=1) as f:
            f.write(archive)
        os.replace(partial, target)
    log.info("built guest initramfs %s", target)
    return target


def run(command: str, cwd: str, timeout: float = 300, disk_mb: int = 64, memory_mb: int = 1024,
        place: Callable[[int], None] | None = None, cancel: threading.Event | None = None) -> GuestResult:
    """Boot the guest, run `command` with /bin/sh in `cwd` of the host's (read-only) root, power off.
    `place(pid)` is given qemu's pid as it starts (a CPU group); `cancel` ends the run as the timeout does."""
    version = kernel_version()
    image = initramfs(version)
    exchange = tempfile.mkdtemp(prefix=PREFIX + uuid.uuid4().hex[:8] + "-")
    os.chmod(exchange, 0o1777)
    disk = os.path.join(tempfile.gettempdir(), os.path.basename(exchange) + ".img")
    console_path = os.path.join(exchange, "console")
    with open(os.path.join(exchange, "command.sh"), "w") as f:
        f.write(command + "\n")
    with open(os.path.join(exchange, "cwd"), "w") as f:
        f.write(cwd)
    with open(disk, "wb") as f:
        f.truncate(disk_mb << 20)
    argv = ["qemu-system-x86_64", "-m", str(memory_mb), "-smp", "1", "-nographic", "-no-reboot",
            "-kernel", f"/boot/vmlinuz-{version}", "-initrd", image,
            "-append", "console=ttyS0 rdinit=/init quiet panic=-1",
            "-drive", f"file={disk},if=virtio,format=raw,cache=none",
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={exchange},mount_tag=exchange,security_model=none",
            "-serial", f"file:{console_path}", "-monitor", "none", "-display", "none", "-nic", "none"]
    argv.remove("-nographic")
    start = time.monotonic()
    qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    boot = None
    try:
        if place is not None:
            place(qemu.pid)
        deadline = start + timeout
        while qemu.poll() is None and time.monotonic() < deadline and not (cancel and cancel.is_set()):
            if boot is None and "guest: booted" in _read(console_path):
                boot = time.monotonic() - start
            time.sleep(0.1)
        finished = qemu.poll() is not None
    finally:
        if qemu.poll() is None:
            qemu.kill()
        qemu.wait()
        total = time.monotonic() - start
        rc_text = _read(os.path.join(exchange, "rc")).strip()
        result = GuestResult(int(rc_text) if finished and rc_text else None,
                             _read(os.path.join(exchange, "output")),
                             _read(console_path) + qemu.stdout.read().decode(errors="replace"),
                             boot if boot is not None else float("nan"), total)
        qemu.stdout.close()
        shutil.rmtree(exchange, ignore_errors=True)
        os.unlink(disk)
    return result


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
