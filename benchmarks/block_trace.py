"""Every request one block device served, from the kernel's block tracepoints, and where one
user's transfers met another's requests there.

The DataNode's scheduler decides the order of packets; the disk's queue decides the order of
reads already issued, where the DataNode cannot reach. This records the device's requests
(block_rq_insert, block_rq_issue, block_rq_complete in a tracefs instance of the run's own, on
the monotonic clock) and maps them to files by their extents (FIEMAP, through filefrag), so a
transfer's time on the disk, each of its requests' wait, and the other user's requests ahead of
it can be told.

    with BlockTrace(run_name, device_number) as trace:
        ...                                    # the workload
    owners = SectorOwners({"alice": her_block_files, "bob": his})
    spans = transfer_spans(trace.requests(), owners.owner, "alice", other="bob")

Needs root and tracefs (testbed/tracefs.py: an instance of the run's own, mounted for the block
if it is not, found by testbed.leftovers after a crash).
"""

import bisect
import re
import subprocess
from dataclasses import dataclass

from testbed.tracefs import TraceInstance
from vnode_sync.errors import KernelError
from vnode_sync.kernel.types import DeviceNumber

EVENTS = ("block_rq_insert", "block_rq_issue", "block_rq_complete")
SECTOR = 512
# "   java-4711  [001] .....  3313.596123: block_rq_issue: 7,3 R 131072 () 4464640 + 256 [java]"
_EVENT = re.compile(r"\s(\d+\.\d+): (block_rq_insert|block_rq_issue|block_rq_complete): "
                    r"\d+,\d+ (\S+) .*?(\d+) \+ (\d+)")
_EXTENT = re.compile(r"^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):")


@dataclass(frozen=True)
class Request:
    issued: float       # s, monotonic clock: handed to the driver
    completed: float
    sector: int
    sectors: int
    operation: str      # the kernel's rwbs: "R", "RA" (read-ahead), "W", "WS", ...
    inserted: float | None = None   # put in the I/O scheduler's queue (None: went to the driver directly)

    @property
    def bytes(self) -> int:
        return self.sectors * SECTOR

    @property
    def queued(self) -> float:
        """When it entered the block layer's queue (the scheduler's, or the driver's without one)."""
        return self.issued if self.inserted is None else min(self.inserted, self.issued)


@dataclass(frozen=True)
class TransferSpan:
    """One burst of a user's requests on the disk and what else the disk served meanwhile."""
    start: float                    # its first request queued (monotonic s)
    end: float                      # its last request completed
    bytes: int
    waits_ms: tuple[float, ...]     # each request, queued to completion
    others_in_flight: int           # bytes of others' requests issued before it and not complete at its start
    others_during: int              # bytes of others' requests completed within its span

    @property
    def span_ms(self) -> float:
        return (self.end - self.start) * 1000


def parse_requests(lines: list[str]) -> list[Request]:
    """Requests from a trace's lines: each issue paired with the completion of the same sector, and
    with its insertion into the scheduler's queue where one came before it."""
    inserted: dict[int, float] = {}
    issued: dict[int, tuple[float, int, str]] = {}
    requests = []
    for line in lines:
        match = _EVENT.search(line)
        if not match:
            continue
        seconds, event, operation, sector, sectors = match.groups()
        if event == "block_rq_insert":
            inserted[int(sector)] = float(seconds)
        elif event == "block_rq_issue":
            issued[int(sector)] = (float(seconds), int(sectors), operation)
        elif int(sector) in issued:
            start, size, operation = issued.pop(int(sector))
            requests.append(Request(start, float(seconds), int(sector), size, operation,
                                    inserted.pop(int(sector), None)))
    return requests


def file_sectors(path: str) -> list[tuple[int, int]]:
    """A file's extents on its device, (first sector, last sector) each."""
    out = subprocess.run(["filefrag", "-v", "-b512", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise KernelError(path, f"filefrag failed: {out.stderr.strip()}")
    return [(int(m.group(1)), int(m.group(2))) for m in map(_EXTENT.match, out.stdout.splitlines()) if m]


class SectorOwners:
    """Which owner (a user's name) a sector's file belongs to."""

    def __init__(self, files_by_owner: dict[str, list[str]]):
        extents = sorted((first, last, owner) for owner, paths in files_by_owner.items()
                         for path in paths for first, last in file_sectors(path))
        self._extents = extents
        self._firsts = [e[0] for e in extents]

    def owner(self, sector: int) -> str | None:
        i = bisect.bisect_right(self._firsts, sector) - 1
        if i >= 0 and self._extents[i][0] <= sector <= self._extents[i][1]:
            return self._extents[i][2]
        return None


def transfer_spans(requests: list[Request], owner_of, user: str, other: str | None = None,
                   gap: float = 0.5) -> list[TransferSpan]:
    """`user`'s requests grouped into transfers (apart by more than `gap` s), each with the requests of
    `other` (None: of anyone else) it met. `owner_of(sector)` names a request's owner (None: no file given)."""
    owned = [(owner_of(r.sector), r) for r in requests]
    mine = sorted((r for owner, r in owned if owner == user), key=lambda r: r.queued)
    others = [r for owner, r in owned if owner != user and (other is None or owner == other)]
    groups: list[list[Request]] = []
    for request in mine:
        if groups and request.queued - groups[-1][-1].queued <= gap:
            groups[-1].append(request)
        else:
            groups.append([request])
    spans = []
    for group in groups:
        start, end = group[0].queued, max(r.completed for r in group)
        spans.append(TransferSpan(
            start, end, sum(r.bytes for r in group), tuple((r.completed - r.queued) * 1000 for r in group),
            sum(r.bytes for r in others if r.issued < start < r.completed),
            sum(r.bytes for r in others if start <= r.completed <= end)))
    return spans


class BlockTrace(TraceInstance):
    """The device's requests while in use (a tracefs instance named `run`)."""

    def __init__(self, run: str, device: DeviceNumber):
        kernel_dev = (device.major << 20) | device.minor   # dev_t as the block tracepoints hold it
        super().__init__(run, {f"block/{event}": f"dev == {kernel_dev}" for event in EVENTS})

    def requests(self) -> list[Request]:
        return parse_requests(self.lines)
