"""A device's sustained sequential read and write rate, measured the way a capacity is meant: bytes/s
the disk itself serves, not the page cache.

- read: O_DIRECT reads of REQUEST_BYTES from the start of the block device, for `seconds` (or to
  its end): the cache neither serves nor keeps them, and nothing is written.
- write: a new file under a directory on the device (its mount point, or a data dir), written with
  O_DIRECT in REQUEST_BYTES requests for `seconds` and made durable with fdatasync before the clock
  stops; the file has a unique name (WRITE_PREFIX) and is removed however the measurement ends.

One request at a time, sequential: what a streaming DataNode reader or writer asks of a disk (an
array that only reaches its rate with many requests in flight measures lower; a capacity set low
wastes some bandwidth, one set high promises what the disk cannot give).
"""

import mmap
import os
import time
import uuid
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, NotFound, VNodeSyncError
from vnode_sync.kernel.types import DeviceNumber

REQUEST_BYTES = 4 << 20
WRITE_PREFIX = ".vnode-capacity-"
# The first requests pay for the seek to the start and a drive's wake-up: not counted.
WARM_UP_SECONDS = 0.2


class MeasureFailed(VNodeSyncError):
    """A device or directory could not be measured (it says which and why)."""


@dataclass(frozen=True)
class Rate:
    bytes: int
    seconds: float

    @property
    def bps(self) -> int:
        return int(self.bytes / self.seconds) if self.seconds > 0 else 0


def _aligned_buffer() -> mmap.mmap:
    """Page-aligned memory: O_DIRECT needs buffers aligned to the device's logical block."""
    return mmap.mmap(-1, REQUEST_BYTES)


def _timed(step, seconds: float) -> Rate:
    """Run `step()` (returns bytes done, 0 at the end) for `seconds` after a short warm-up."""
    deadline = time.monotonic() + WARM_UP_SECONDS
    while time.monotonic() < deadline:
        if not step():
            break
    done, start = 0, time.monotonic()
    while time.monotonic() - start < seconds:
        n = step()
        if not n:
            break
        done += n
    return Rate(done, time.monotonic() - start)


def read_rate(device: str, seconds: float) -> Rate:
    """Sequential O_DIRECT reads of `device` from its start."""
    try:
        fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        raise MeasureFailed(f"cannot open {device} for direct reads: {e.strerror}") from e
    buffer = _aligned_buffer()
    try:
        return _timed(lambda: os.readv(fd, [buffer]), seconds)
    except OSError as e:
        raise MeasureFailed(f"reading {device} failed: {e.strerror}") from e
    finally:
        os.close(fd)
        buffer.close()


def write_rate(directory: str, seconds: float) -> Rate:
    """Sequential O_DIRECT writes of a new file in `directory`, fdatasync'd inside the timed span."""
    path = os.path.join(directory, f"{WRITE_PREFIX}{uuid.uuid4().hex}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
    except OSError as e:
        raise MeasureFailed(f"cannot create a file for direct writes in {directory}: {e.strerror}") from e
    buffer = _aligned_buffer()
    buffer.write(os.urandom(REQUEST_BYTES))   # not zeros: nothing on the way may compress or skip them
    try:
        start = time.monotonic()
        rate = _timed(lambda: os.writev(fd, [buffer]), seconds)
        synced = time.monotonic()
        os.fdatasync(fd)
        return Rate(rate.bytes, rate.seconds + (time.monotonic() - synced))
    except OSError as e:
        raise MeasureFailed(f"writing in {directory} failed after {time.monotonic() - start:.1f} s: "
                            f"{e.strerror}") from e
    finally:
        os.close(fd)
        buffer.close()
        os.unlink(path)


def mount_point(device: DeviceNumber, mountinfo_path: str = "/proc/self/mountinfo") -> str:
    """Where the file system on `device` is mounted (its first mount); NotFound if it is not."""
    with open(mountinfo_path) as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and fields[2] == f"{device.major}:{device.minor}":
                return fields[4].replace("\\040", " ")
    raise NotFound(f"no file system of device {device} is mounted: give a directory on it to write in")


def checked_seconds(value: float) -> float:
    if not 0.5 <= value <= 600:
        raise InvalidArgument(f"invalid measurement time {value!r} s: allowed 0.5 to 600 seconds")
    return value
