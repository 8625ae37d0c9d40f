"""Run inside the cgroup-v2 guest: a power-loss stand-in for the batch spool (issue 24).

The spool sits on ext4 on a dm-flakey device over the guest's disk (the guest's Debian 6.1 kernel
ships dm-flakey; this host's has no device-mapper targets). An event is spooled with EventSpool.save
(durable: file and directory fsynced), then a second one the way the spool wrote before (temp file
and rename, no fsync) as the control. "Power off" as xfstests' dmflakey does it: the table switches
to drop_writes (suspend --nolockfs: the file system is not frozen, so nothing is flushed first), the
file system is unmounted (its dirty pages and journal go nowhere) and the caches dropped; then writes
are allowed again and the file system mounted (journal replay). What the spool holds now is what a
power loss would have left. The control must be gone (else the stand-in loses nothing and proves
nothing); the durable event must be there and readable.
"""

import dataclasses
import json
import os
import subprocess
import sys
import tempfile

from vnode_sync.batch.jobs import JobEvent, JobPhase
from vnode_sync.batch.spool import EventSpool

DISK, NAME = "/dev/vda", f"vnode-sync-spool-{os.getpid()}"
ENV = dict(os.environ, DM_DISABLE_UDEV="1")   # no udev in the guest: libdevmapper makes /dev/mapper nodes itself


def sh(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, env=ENV)
    if result.returncode != 0:
        raise SystemExit(f"POWER_LOSS setup failed: {' '.join(argv)}: {result.stderr.strip()}")
    return result.stdout


def flakey_table(sectors: int, writes: bool) -> str:
    # dm-flakey: <dev> <offset> <up seconds> <down seconds> [features]; while "down" with drop_writes,
    # writes are acknowledged and thrown away, reads served (kernel Documentation/admin-guide/device-mapper/dm-flakey.rst).
    return f"0 {sectors} flakey {DISK} 0 3600 0" if writes else f"0 {sectors} flakey {DISK} 0 0 3600 1 drop_writes"


def load(sectors: int, writes: bool) -> None:
    sh("dmsetup", "suspend", "--nolockfs", NAME)
    sh("dmsetup", "load", NAME, "--table", flakey_table(sectors, writes))
    sh("dmsetup", "resume", NAME)


def unsynced_save(spool: EventSpool, event: JobEvent) -> None:
    """The spool's write before issue 24: a temp file renamed into place, nothing fsynced."""
    path = spool._path(event.job_id, event.node)
    with open(path + ".tmp", "w") as f:
        json.dump({**dataclasses.asdict(event), "phase": event.phase.value}, f)
    os.replace(path + ".tmp", path)


for module in ("dm-flakey", "crc32c_generic", "ext4"):   # the kernel's own module loader is not in the guest's root
    sh("modprobe", module)
sectors = int(sh("blockdev", "--getsz", DISK))
sh("mkfs.ext4", "-q", "-F", DISK)
sh("dmsetup", "create", NAME, "--table", flakey_table(sectors, writes=True))
device, mountpoint = f"/dev/mapper/{NAME}", tempfile.mkdtemp(prefix="vnode-sync-spool.")
# A journal commit every 60 s instead of 5: only an fsync commits the control's file before the power goes.
sh("mount", "-t", "ext4", "-o", "commit=60", device, mountpoint)
spool = EventSpool(os.path.join(mountpoint, "spool"))
durable = JobEvent(JobPhase.START, "41", "alice", 64_601, "cn1", account="physics")
control = JobEvent(JobPhase.START, "42", "bob", 64_602, "cn1", account="physics")
spool.save(durable)
unsynced_save(spool, control)
before = sorted(e.job_id for e in spool.pending())

load(sectors, writes=False)              # the power goes: nothing written from here on reaches the disk
sh("umount", mountpoint)
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3\n")
load(sectors, writes=True)               # the power comes back
sh("mount", "-t", "ext4", device, mountpoint)
after = {e.job_id: e for e in spool.pending()}
left = sorted(os.listdir(spool.directory)) if os.path.isdir(spool.directory) else []
sh("umount", mountpoint)
sh("dmsetup", "remove", NAME)

print(f"POWER_LOSS before: jobs {before}; after: jobs {sorted(after)}; files {left}")
print(f"POWER_LOSS durable event: {'kept' if after.get('41') == durable else 'LOST'}")
print(f"POWER_LOSS unsynced control: {'dropped' if '42' not in after else 'kept'}")
sys.exit(0 if after.get("41") == durable and "42" not in after else 1)
