"""The paced disk: a pacer that serves one queue at a fixed rate, a FUSE server that speaks the
kernel's protocol for one file, and the real thing (FUSE + loop + ext4) set up and removed."""

import errno
import os
import socket
import struct
import subprocess
import threading
import time

import pytest

from tests.conftest import needs_fuse, unique_name
from tests.fakes.clock import Clock
from vnode_sync.errors import InvalidArgument
from benchmarks.dirty_pacing import one_rate
from testbed import early_writeback
from testbed import paced_fuse as fuse
from testbed.loopdev import stale_loops, stale_mounts
from testbed.paced_disk import DIRTY_MB, IMAGE_NAME, DiskModel, PacedDisk


def test_the_pacer_serves_reads_one_after_another_at_its_rate():
    clock = Clock(now=0.0)
    pacer = fuse.Pacer(rate=1e6, burst_seconds=0.005, clock=clock)
    assert [pacer.done_at(1_000_000) for _ in range(3)] == [1.0, 2.0, 3.0]  # queued behind each other


def test_the_pacer_credits_idle_time_only_up_to_its_burst():
    clock = Clock(now=0.0)
    pacer = fuse.Pacer(rate=1e6, burst_seconds=0.005, clock=clock)
    pacer.done_at(1_000_000)
    clock.now = 10.0  # idle for 9 s: a disk does not bank them
    assert pacer.done_at(1_000_000) == pytest.approx(10.995)


def test_the_pacer_credits_idle_time_only_to_a_request_that_continues_a_recent_stream():
    clock = Clock(now=0.0)
    pacer = fuse.Pacer(rate=1e6, burst_seconds=0.005, clock=clock)
    pacer.done_at(1_000_000, offset=0)
    pacer.done_at(1_000_000, offset=80_000_000)
    clock.now = 10.0
    elsewhere = pacer.done_at(1_000_000, offset=50_000_000)    # another file's first read: no credit
    clock.now = 20.0
    continuing = pacer.done_at(1_000_000, offset=1_000_000)    # the first stream, two requests on
    assert (elsewhere, continuing) == pytest.approx((11.0, 20.995))


def test_a_spindle_pays_its_seek_only_for_a_request_that_does_not_continue_the_last():
    clock = Clock(now=0.0)
    pacer = fuse.Pacer(rate=1e6, burst_seconds=0.0, seek_seconds=0.01, clock=clock)
    first = pacer.done_at(1_000_000, offset=0)              # the head starts nowhere: one seek
    sequential = pacer.done_at(1_000_000, offset=1_000_000)
    random = pacer.done_at(1_000_000, offset=50_000_000)
    assert (first, sequential, random) == pytest.approx((1.01, 2.01, 3.02))


def test_a_pacer_without_a_positive_rate_is_refused():
    with pytest.raises(InvalidArgument, match="above 0"):
        fuse.Pacer(rate=0)


# ---- the server's side of the FUSE protocol, over a socket pair instead of /dev/fuse ----------
# SOCK_SEQPACKET keeps message boundaries as /dev/fuse does: one read is one request, one
# write one reply.

class Kernel:
    """Plays the kernel: sends requests to a PacedFileServer running in a thread, reads its replies."""

    def __init__(self, image: str, rate: float = 1e12, pace_writes: bool = False):
        self.ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.server = fuse.PacedFileServer(theirs.detach(), image, fuse.Pacer(rate), pace_writes)
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.thread.start()
        self.unique = 0

    def send(self, opcode: int, body: bytes = b"", node: int = fuse.ROOT_ID) -> int:
        self.unique += 1
        self.ours.send(fuse.IN_HEADER.pack(fuse.IN_HEADER.size + len(body), opcode, self.unique, node,
                                           0, 0, 0, 0, 0) + body)
        return self.unique

    def reply(self, timeout: float = 5) -> tuple[int, int, bytes]:
        """(unique, error, body) of the next reply."""
        self.ours.settimeout(timeout)
        message = self.ours.recv(fuse.MAX_IO + 4096)
        length, error, unique = fuse.OUT_HEADER.unpack_from(message)
        assert length == len(message)
        return unique, error, message[fuse.OUT_HEADER.size:]

    def close(self) -> None:
        self.ours.close()  # the server reads end-of-connection and returns
        self.thread.join(5)


@pytest.fixture
def kernel(tmp_path):
    image = tmp_path / "disk.raw"
    image.write_bytes(bytes(range(256)) * 4096)  # 1 MiB with a recognisable pattern
    k = Kernel(str(image))
    yield k
    k.close()
    assert not k.thread.is_alive()


def test_init_offers_async_direct_io_and_one_mib_requests(kernel):
    unique = kernel.send(fuse.INIT, struct.pack("<IIII", 7, 38, 1 << 20, 0))
    got, error, body = kernel.reply()
    major, minor, _, flags, _, _, max_write, _, max_pages, *_ = fuse.INIT_OUT.unpack(body)
    assert (got, error, major, minor) == (unique, 0, *fuse.PROTOCOL)
    assert flags & fuse.FUSE_ASYNC_DIO and flags & fuse.FUSE_ASYNC_READ
    assert max_write == fuse.MAX_IO and max_pages * 4096 == fuse.MAX_IO


def test_lookup_finds_the_one_file_with_its_size_and_nothing_else(kernel):
    kernel.send(fuse.LOOKUP, fuse.FILE_NAME.encode() + b"\0")
    _, error, body = kernel.reply()
    node = struct.unpack_from("<Q", body)[0]
    size = fuse.ATTR.unpack_from(body, fuse.ENTRY_OUT.size)[1]
    assert (error, node, size) == (0, fuse.FILE_ID, 1 << 20)
    kernel.send(fuse.LOOKUP, b"other.img\0")
    assert kernel.reply()[1] == -errno.ENOENT


def test_open_asks_the_kernel_for_direct_io(kernel):
    kernel.send(fuse.OPEN, struct.pack("<II", os.O_RDWR, 0), node=fuse.FILE_ID)
    _, error, body = kernel.reply()
    assert error == 0 and fuse.OPEN_OUT.unpack(body)[1] & fuse.FOPEN_DIRECT_IO


def test_reads_return_the_images_bytes_and_stop_at_its_end(kernel):
    kernel.send(fuse.READ, fuse.READ_IN.pack(0, 4096 + 3, 5) + bytes(20), node=fuse.FILE_ID)
    assert kernel.reply()[2] == bytes([3, 4, 5, 6, 7])
    kernel.send(fuse.READ, fuse.READ_IN.pack(0, (1 << 20) - 2, 4096) + bytes(20), node=fuse.FILE_ID)
    assert kernel.reply()[2] == bytes([254, 255])


def test_writes_reach_the_image(kernel, tmp_path):
    body = struct.pack("<QQIIQII", 0, 10, 3, 0, 0, 0, 0) + b"abc"
    kernel.send(fuse.WRITE, body, node=fuse.FILE_ID)
    _, error, reply = kernel.reply()
    assert (error, fuse.WRITE_OUT.unpack(reply)[0]) == (0, 3)
    assert (tmp_path / "disk.raw").read_bytes()[10:13] == b"abc"


def test_unknown_requests_get_enosys_and_forgets_get_no_reply(kernel):
    kernel.send(fuse.FORGET, struct.pack("<Q", 1), node=fuse.FILE_ID)
    unique = kernel.send(999)
    got, error, _ = kernel.reply()
    assert (got, error) == (unique, -errno.ENOSYS)  # the first reply is the unknown request's


def test_a_paced_read_is_answered_after_the_reads_queued_before_it(tmp_path):
    image = tmp_path / "disk.raw"
    image.write_bytes(bytes(1 << 20))
    kernel = Kernel(str(image), rate=1e6)  # 131 ms for the first read (a socket's message is < 200 KiB)
    try:
        first = kernel.send(fuse.READ, fuse.READ_IN.pack(0, 0, 128 << 10) + bytes(20), node=fuse.FILE_ID)
        second = kernel.send(fuse.READ, fuse.READ_IN.pack(0, 0, 4096) + bytes(20), node=fuse.FILE_ID)
        assert [kernel.reply()[0], kernel.reply()[0]] == [first, second]
    finally:
        kernel.close()


def test_a_spindle_paces_writes_in_the_same_queue_as_reads(tmp_path):
    image = tmp_path / "disk.raw"
    image.write_bytes(bytes(1 << 20))
    kernel = Kernel(str(image), rate=1e6, pace_writes=True)  # the write costs 128 ms
    try:
        write = kernel.send(fuse.WRITE, struct.pack("<QQIIQII", 0, 0, 128 << 10, 0, 0, 0, 0) + bytes(128 << 10),
                            node=fuse.FILE_ID)
        read = kernel.send(fuse.READ, fuse.READ_IN.pack(0, 0, 4096) + bytes(20), node=fuse.FILE_ID)
        started = time.monotonic()
        assert [kernel.reply()[0], kernel.reply()[0]] == [write, read]
        assert time.monotonic() - started > 0.1
    finally:
        kernel.close()


# ---- the real thing: FUSE, loop device, ext4 ------------------------------------------------

def _server_running(directory: str) -> bool:
    return subprocess.run(["pgrep", "-f", f"paced_disk serve {directory}"], capture_output=True).returncode == 0


@needs_fuse
def test_a_paced_disk_keeps_what_is_written_and_leaves_nothing_when_removed(tmp_path):
    directory = tmp_path / unique_name("paced")
    directory.mkdir()
    disk = PacedDisk.create(str(directory), str(directory / "mnt"), size_mb=64, model=DiskModel(500))
    try:
        with open(f"/sys/block/{os.path.basename(disk.device)}/loop/dio") as f:
            assert f.read().strip() == "1"  # the loop reads the FUSE file with O_DIRECT: nothing cached between
        data = os.urandom(4 << 20)
        (directory / "mnt" / "f").write_bytes(data)
        fd = os.open(directory / "mnt" / "f", os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        assert (directory / "mnt" / "f").read_bytes() == data
        assert _server_running(str(directory))
    finally:
        disk.remove()
    assert stale_mounts(str(directory)) == [] and stale_loops(str(directory)) == []
    assert not (directory / IMAGE_NAME).exists()
    deadline = time.monotonic() + 10  # the server reads the end of its connection and exits
    while _server_running(str(directory)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _server_running(str(directory))


@needs_fuse
def test_a_streaming_disk_holds_a_buffered_writer_to_its_pace_and_lifts_the_cap_when_removed(tmp_path):
    directory = tmp_path / unique_name("stream")
    directory.mkdir()
    disk = PacedDisk.create(str(directory), str(directory / "mnt"), size_mb=512, model=DiskModel.streaming(100))
    bdi = f"/sys/class/bdi/{disk.device_number.major}:{disk.device_number.minor}"
    try:
        assert _read(f"{bdi}/strict_limit") == "1"
        assert int(_read(f"{bdi}/max_bytes")) == pytest.approx(DIRTY_MB * 1e6, rel=0.05)
        os.sync()
        start = time.monotonic()
        with open(directory / "mnt" / "f", "wb") as f:   # buffered: no fsync, as a DataNode writes
            for _ in range(256):
                f.write(b"\0" * (1 << 20))
        elapsed = time.monotonic() - start
        # Only DIRTY_MB may wait in the page cache; the rest goes at 100 MB/s (without the cap:
        # about 0.5 s here for all 256 MiB).
        assert elapsed >= 0.8 * (256 * (1 << 20) - DIRTY_MB * 1e6) / 100e6
    finally:
        disk.remove()
    assert (_read(f"{bdi}/strict_limit"), _read(f"{bdi}/max_ratio")) == ("0", "100")


@needs_fuse
def test_a_writer_at_half_a_streaming_disks_speed_is_not_paced_by_the_kernel(tmp_path):
    """With the kernel's own writeback the same writer is paced 14-30 % of the time (benchmarks.dirty_pacing
    prints both); that baseline varies with the flusher's timing, so it is measured, not asserted."""
    directory = tmp_path / unique_name("stream")
    directory.mkdir()
    before = {s: _read(f"/proc/sys/vm/{s}") for s in early_writeback.SETTINGS}
    disk = PacedDisk.create(str(directory), str(directory / "mnt"), size_mb=1024, model=DiskModel.streaming(60))
    try:
        assert disk.writeback_holder
        assert int(_read("/proc/sys/vm/dirty_background_bytes")) == early_writeback.EARLY_BACKGROUND_BYTES
        pacing = one_rate(str(directory / "mnt"), str(disk.device_number), 30, seconds=4)
    finally:
        disk.remove()
    assert pacing.kept_mbps == pytest.approx(30, rel=0.1)
    assert pacing.paused <= 0.03, pacing   # measured: 0 % up to 58 MB/s
    if not early_writeback.holders():   # no other run holds it: the setting is back
        assert {s: _read(f"/proc/sys/vm/{s}") for s in early_writeback.SETTINGS} == before


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def test_a_paced_disk_with_no_rate_is_refused_before_anything_is_made(tmp_path):
    with pytest.raises(InvalidArgument, match="read_mbps"):
        PacedDisk.create(str(tmp_path), str(tmp_path / "mnt"), size_mb=64, model=DiskModel(0))
    assert os.listdir(tmp_path) == []
