"""A one-file FUSE file system whose reads are paced to a fixed bandwidth, spoken straight to /dev/fuse.

The kernel's FUSE protocol (linux/fuse.h) is small for one file: the server mounts with
an fd of /dev/fuse, reads requests from it and writes replies. One thread does it all:
a read is answered when the pacer says the "disk" is done with it, so requests queue as
they would at a real disk. Serving 100 MB/s costs this process about 0.15 CPUs (ps during
the overhead benchmark); a libfuse binding (mfusepy), one thread per request, took a whole
CPU for 83 MB/s here and could not keep up with the pace it was set.

    server = PacedFileServer.mount("/tmp/vnode-sync-x/dn0/disk.raw", "/tmp/vnode-sync-x/dn0/paced", Pacer(100e6))
    server.serve()   # until the mount goes away; the file is MOUNTPOINT/disk.img
"""

import collections
import ctypes
import ctypes.util
import errno
import heapq
import os
import select
import stat
import struct
import time

from vnode_sync.errors import InvalidArgument, KernelError

FILE_NAME = "disk.img"
ROOT_ID, FILE_ID = 1, 2
MAX_IO = 1 << 20  # bytes per request the kernel may send (max_pages 256)

# Opcodes and flags of linux/fuse.h, protocol 7.31 (Linux >= 5.4).
LOOKUP, FORGET, GETATTR, SETATTR, OPEN, READ, WRITE, STATFS, RELEASE, FSYNC = 1, 2, 3, 4, 14, 15, 16, 17, 18, 20
FLUSH, INIT, OPENDIR, RELEASEDIR, INTERRUPT, DESTROY, BATCH_FORGET = 25, 26, 27, 29, 36, 38, 42
NO_REPLY = {FORGET, BATCH_FORGET, INTERRUPT}  # interrupted reads are answered when due, as if not interrupted
FUSE_ASYNC_READ, FUSE_BIG_WRITES, FUSE_ASYNC_DIO, FUSE_MAX_PAGES = 1 << 0, 1 << 5, 1 << 15, 1 << 22
FOPEN_DIRECT_IO = 1 << 0
PROTOCOL = (7, 31)

IN_HEADER = struct.Struct("<IIQQIIIHH")
OUT_HEADER = struct.Struct("<IiQ")
INIT_OUT = struct.Struct("<IIIIHHIIHHI7I")
ATTR = struct.Struct("<QQQQQQIIIIIIIIII")
ATTR_OUT = struct.Struct("<QII")  # followed by ATTR
ENTRY_OUT = struct.Struct("<QQQQII")  # followed by ATTR
OPEN_OUT = struct.Struct("<QII")
READ_IN = struct.Struct("<QQI")  # fh, offset, size (the rest unused)
WRITE_IN = struct.Struct("<QQII QII")  # fh, offset, size, write_flags, lock_owner, flags, padding
WRITE_OUT = struct.Struct("<II")
STATFS_OUT = struct.Struct("<QQQQQIIII6I")


class Pacer:
    """One queue served at `rate` bytes/s: a request of n bytes is done n/rate after the previous one,
    plus `seek_seconds` when it does not start where the previous one ended (one spindle).

    A request that continues one of the last few streams (it starts where one of the last
    STREAMS requests ended) is credited up to `burst_seconds` of idle time, so the small gaps
    between one request's reply and the next request (a lone sequential reader) do not cost
    bandwidth that a deeper queue would have used: as a drive's read-ahead cache keeps streaming.
    A request elsewhere gets no credit: an idle disk serves it no faster than a busy one would
    once free (crediting any request made a capped reader's 256 KB requests free beside an
    interactive one: benchmarks/results/edge/README.md).
    """

    STREAMS = 4

    def __init__(self, rate: float, burst_seconds: float = 0.005, seek_seconds: float = 0.0, clock=time.monotonic):
        if rate <= 0:
            raise InvalidArgument(f"read rate {rate} must be above 0")
        if seek_seconds < 0:
            raise InvalidArgument(f"seek time {seek_seconds} s must not be negative")
        self.rate, self.burst_seconds, self.seek_seconds, self.clock = rate, burst_seconds, seek_seconds, clock
        self._busy_until = clock()
        self._stream_ends: collections.deque[int] = collections.deque(maxlen=self.STREAMS)   # the last is the head

    def done_at(self, nbytes: int, offset: int | None = None) -> float:
        """Reserve the device for `nbytes` at `offset`; returns the clock time the request completes.
        Without an offset every request counts as continuing a stream."""
        continues = offset is None or offset in self._stream_ends
        start = max(self._busy_until, self.clock() - (self.burst_seconds if continues else 0.0))
        head = self._stream_ends[-1] if self._stream_ends else None
        seek = self.seek_seconds if offset is not None and offset != head else 0.0
        if offset is not None:
            if continues:
                self._stream_ends.remove(offset)
            self._stream_ends.append(offset + nbytes)
        self._busy_until = start + seek + nbytes / self.rate
        return self._busy_until


class PacedFileServer:
    """Serves one fixed-size file, `disk.img`, from an image file; reads paced, writes too if asked."""

    def __init__(self, fuse_fd: int, image: str, pacer: Pacer, pace_writes: bool = False):
        self.fd, self.pacer, self.pace_writes = fuse_fd, pacer, pace_writes
        self.image = os.open(image, os.O_RDWR)
        self.size = os.fstat(self.image).st_size
        self._due: list[tuple[float, int, bytes]] = []  # (done at, unique, reply): requests waiting for the pacer

    @classmethod
    def mount(cls, image: str, mountpoint: str, pacer: Pacer, pace_writes: bool = False) -> "PacedFileServer":
        fuse_fd = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        options = f"fd={fuse_fd},rootmode={stat.S_IFDIR:o},user_id=0,group_id=0,max_read={MAX_IO}"
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.mount(b"vnode-sync-paced", mountpoint.encode(), b"fuse", 0, options.encode()) != 0:
            code = ctypes.get_errno()
            os.close(fuse_fd)
            raise KernelError(mountpoint, f"mounting FUSE failed: {os.strerror(code)}")
        return cls(fuse_fd, image, pacer, pace_writes)

    def serve(self) -> None:
        """Answer requests until the file system is unmounted (the kernel then ends the connection)."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while True:
            self._send_due()
            timeout = None if not self._due else max(0.0, self._due[0][0] - time.monotonic()) * 1000
            if not poller.poll(timeout):
                continue
            try:
                request = os.read(self.fd, MAX_IO + 4096)
            except OSError as e:
                if e.errno == errno.ENODEV:  # unmounted
                    return
                if e.errno in (errno.EINTR, errno.ENOENT):  # ENOENT: a request interrupted before we read it
                    continue
                raise
            if len(request) < IN_HEADER.size:  # end of the connection (the kernel never sends less)
                return
            self._handle(request)

    def _send_due(self) -> None:
        now = time.monotonic()
        while self._due and self._due[0][0] <= now:
            _, unique, data = heapq.heappop(self._due)
            self._reply(unique, data)

    def _reply(self, unique: int, body: bytes = b"", error: int = 0) -> None:
        try:
            os.writev(self.fd, [OUT_HEADER.pack(OUT_HEADER.size + len(body), -error, unique), body])
        except FileNotFoundError:  # the request was interrupted and the kernel has forgotten it
            pass

    def _handle(self, request: bytes) -> None:
        _, opcode, unique, node, *_ = IN_HEADER.unpack_from(request)
        body = memoryview(request)[IN_HEADER.size:]
        if opcode in NO_REPLY:
            return
        if opcode == READ:
            _, offset, size = READ_IN.unpack_from(body)
            data = os.pread(self.image, min(size, max(0, self.size - offset)), offset)
            heapq.heappush(self._due, (self.pacer.done_at(len(data), offset), unique, data))
        elif opcode == WRITE:
            _, offset, size, *_ = WRITE_IN.unpack_from(body)
            written = os.pwrite(self.image, body[WRITE_IN.size:WRITE_IN.size + size], offset)
            if self.pace_writes:
                heapq.heappush(self._due, (self.pacer.done_at(written, offset), unique, WRITE_OUT.pack(written, 0)))
            else:
                self._reply(unique, WRITE_OUT.pack(written, 0))
        elif opcode == INIT:
            # Async direct I/O: the loop device's reads queue here at once, as at a disk, not one by one.
            flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ASYNC_DIO | FUSE_MAX_PAGES
            max_background, congestion_threshold, time_granularity = 16, 12, 1
            self._reply(unique, INIT_OUT.pack(*PROTOCOL, MAX_IO, flags, max_background, congestion_threshold, MAX_IO,
                                              time_granularity, MAX_IO // 4096, 0, 0, *[0] * 7))
        elif opcode == LOOKUP:
            if bytes(body).rstrip(b"\0") != FILE_NAME.encode() or node != ROOT_ID:
                self._reply(unique, error=errno.ENOENT)
            else:
                self._reply(unique, ENTRY_OUT.pack(FILE_ID, 0, 3600, 3600, 0, 0) + self._attr(FILE_ID))
        elif opcode in (GETATTR, SETATTR):  # the size is fixed: a SETATTR changes nothing
            self._reply(unique, ATTR_OUT.pack(3600, 0, 0) + self._attr(node))
        elif opcode in (OPEN, OPENDIR):
            self._reply(unique, OPEN_OUT.pack(0, FOPEN_DIRECT_IO if opcode == OPEN else 0, 0))
        elif opcode == FSYNC:
            os.fdatasync(self.image)
            self._reply(unique)
        elif opcode in (FLUSH, RELEASE, RELEASEDIR, DESTROY):
            self._reply(unique)
        elif opcode == STATFS:
            self._reply(unique, STATFS_OUT.pack(self.size // 4096, 0, 0, 2, 0, 4096, 255, 4096, 0, *[0] * 6))
        else:
            self._reply(unique, error=errno.ENOSYS)

    def _attr(self, node: int) -> bytes:
        if node == ROOT_ID:
            return ATTR.pack(ROOT_ID, 0, 0, 0, 0, 0, 0, 0, 0, stat.S_IFDIR | 0o755, 2, 0, 0, 0, 4096, 0)
        return ATTR.pack(FILE_ID, self.size, self.size // 512, 0, 0, 0, 0, 0, 0, stat.S_IFREG | 0o600, 1,
                         0, 0, 0, 4096, 0)
