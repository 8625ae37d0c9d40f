"""Where each HDFS file write's time went, read from the NameNode's and DataNode's own INFO logs.

A write's close (every packet acknowledged, then the file completed at the NameNode) is most of
an interactive write's time, and the client alone cannot say which side it waited for. The
daemons log every step with a millisecond timestamp:
- NameNode `BLOCK* allocate blk_N_G ... for PATH`: the block is given to the client;
- DataNode `Receiving ...:blk_N_G`: the pipeline reached the DataNode (its transfer thread began);
- DataNode `clienttrace ... op: HDFS_WRITE ... blockid: ...:blk_N_G, duration(ns): D`: the block is
  finalized; D is the time from the last packet's arrival to its finalization (BlockReceiver);
- NameNode `is COMMITTED but not COMPLETE ... in file PATH`: a completeFile the client must retry
  (the DataNode's block report had not reached the NameNode yet);
- NameNode `DIR* completeFile: PATH is closed`: done.
Single-block files only (an interactive write's): a file's first block stands for it.
"""

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

_STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_ALLOCATE = re.compile(_STAMP + r" .*BLOCK\* allocate (blk_-?\d+)_\d+.* for (\S+)$")
_RECEIVING = re.compile(_STAMP + r" .*Receiving \S*?(blk_-?\d+)_\d+ src:")
_FINALIZED = re.compile(_STAMP + r" .*clienttrace: .*op: HDFS_WRITE, .*?(blk_-?\d+)_\d+, duration\(ns\): (\d+)")
_NOT_COMPLETE = re.compile(_STAMP + r" .*is COMMITTED but not COMPLETE.* in file (\S+)$")
_CLOSED = re.compile(_STAMP + r" .*DIR\* completeFile: (\S+) is closed by")


def _seconds(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


@dataclass(frozen=True)
class FileWrite:
    path: str
    to_datanode: float      # s: block allocated -> the DataNode began receiving it
    receiving: float        # s: the DataNode received every packet and finalized the block
    to_closed: float        # s: finalized -> completeFile succeeded at the NameNode
    complete_retries: int   # completeFile calls the NameNode turned down first

    @property
    def total(self) -> float:
        return self.to_datanode + self.receiving + self.to_closed


def log_lines(path: str) -> list[str]:
    """A daemon's log, line by line (bytes that are not UTF-8 replaced)."""
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def closes_turned_down(namenode_log: list[str]) -> Counter[str]:
    """How many times the NameNode turned down each file's completeFile (files it closed at once: 0)."""
    return Counter(m[2] for line in namenode_log if (m := _NOT_COMPLETE.match(line)))


def file_writes(namenode_log: list[str], datanode_log: list[str], prefix: str = "/") -> list[FileWrite]:
    """Every file under `prefix` whose write the logs show whole, in the order they were allocated."""
    allocated: dict[str, tuple[float, str]] = {}
    retries = closes_turned_down(namenode_log)
    closed: dict[str, float] = {}
    for line in namenode_log:
        if m := _ALLOCATE.match(line):
            if m[3].startswith(prefix):
                allocated.setdefault(m[3], (_seconds(m[1]), m[2]))
        elif m := _CLOSED.match(line):
            closed[m[2]] = _seconds(m[1])
    received: dict[str, float] = {}
    finalized: dict[str, float] = {}
    for line in datanode_log:
        if m := _RECEIVING.match(line):
            received.setdefault(m[2], _seconds(m[1]))
        elif m := _FINALIZED.match(line):
            finalized.setdefault(m[2], _seconds(m[1]))
    writes = []
    for path, (at, block) in sorted(allocated.items(), key=lambda item: item[1][0]):
        if block in received and block in finalized and path in closed:
            writes.append(FileWrite(path, received[block] - at, finalized[block] - received[block],
                                    closed[path] - finalized[block], retries.get(path, 0)))
    return writes


def describe(writes: list[FileWrite]) -> str:
    """One line per write, in ms: to the DataNode / receiving / to closed, and completeFile retries."""
    return ", ".join(f"{w.to_datanode * 1000:.0f}/{w.receiving * 1000:.0f}/{w.to_closed * 1000:.0f}"
                     + (f" r{w.complete_retries}" if w.complete_retries else "") for w in writes)
