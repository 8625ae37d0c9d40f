"""A reader that streams a block device with O_DIRECT as a given uid and reports its rate.

The device is opened as root before dropping to `uid`, so the reader needs no access
rights of its own; O_DIRECT keeps the page cache out, so every byte is block I/O and
the VNode's throttle applies. Its comm is set to `name` so a discovery pattern can find it.

    python -m testbed.direct_reader /dev/loop3 --uid 64001 --name vsreader --seconds 8
prints one JSON line: {"bytes": ..., "seconds": ..., "bytes_per_second": ...}
"""

import argparse
import ctypes
import json
import mmap
import os
import sys
import time

PR_SET_NAME = 15
BLOCK = 1 << 20


def set_comm(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def stream(fd: int, size: int, seconds: float, warmup: float, pace: float = 0.0) -> tuple[int, float]:
    """Read sequentially (wrapping at `size`) for warmup+seconds; count only after warmup.
    `pace`: read no faster than this many bytes/s (0: as fast as the device and its throttle allow)."""
    buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
    offset = 0
    start = time.monotonic()
    counted, measure_from, read = 0, start + warmup, 0
    while True:
        now = time.monotonic()
        if now >= measure_from + seconds:
            return counted, now - measure_from
        if pace and read > pace * (now - start):
            time.sleep(min(0.05, read / pace - (now - start)))
            continue
        n = os.preadv(fd, [buf], offset)
        read += max(n, 0)
        if n <= 0:
            offset = 0
            continue
        offset = (offset + n) % size
        if now >= measure_from:
            counted += n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--name", default="vsreader", help="thread name (comm), at most 15 characters")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before counting starts")
    parser.add_argument("--bytes-per-second", type=float, default=0.0,
                        help="read no faster than this (a user well below its share); 0: as fast as allowed")
    parser.add_argument("--start-delay", type=float, default=0.0,
                        help="seconds to wait after dropping privileges, so an agent can place this thread")
    args = parser.parse_args(argv)
    fd = os.open(args.device, os.O_RDONLY | os.O_DIRECT)
    size = os.lseek(fd, 0, os.SEEK_END) // BLOCK * BLOCK
    os.setgroups([])
    os.setresgid(args.uid, args.uid, args.uid)
    os.setresuid(args.uid, args.uid, args.uid)
    set_comm(args.name)
    time.sleep(args.start_delay)
    counted, elapsed = stream(fd, size, args.seconds, args.warmup, args.bytes_per_second)
    print(json.dumps({"bytes": counted, "seconds": round(elapsed, 3),
                      "bytes_per_second": round(counted / elapsed, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
