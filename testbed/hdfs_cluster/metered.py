"""`hdfs dfs -put -` and `hdfs dfs -cat` as a user runs them, metered from the client's side.

    put = MeteredPut(cluster, "/alice/a.bin", as_uid=uid, hdfs_user="alice")   # FsShell reads our pipe
    cat = MeteredCat(cluster, ["/alice/on-dn0.bin"] * 8, as_uid=uid, hdfs_user="alice")
    a = put.bytes; time.sleep(5); rate = (put.bytes - a) / 5    # what the client pushed or got
    put.finish(); cat.stop()
    clients, nodes = window(hdfs, {"alice": put}, "write", 5)   # beside the DataNode throttlers' counters

The byte counts are the client's own: what `-put` accepted on its standard input (incompressible
bytes; once its DFSOutputStream queue is full it takes them as fast as the DataNodes do) and
what `-cat` wrote to its standard output. No vnode-sync counter is involved.
"""

import os
import subprocess
import threading
import time

from vnode_sync.datanode.channel import ThrottleChannel
from vnode_sync.errors import Unavailable

CHUNK = 1 << 20


class _Metered:
    def __init__(self, process: subprocess.Popen, what: str):
        self.process, self.what = process, what
        self._bytes = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._pump, name=what, daemon=True)
        self._thread.start()

    @property
    def bytes(self) -> int:
        with self._lock:
            return self._bytes

    def _count(self, n: int) -> None:
        with self._lock:
            self._bytes += n

    def _pump(self) -> None:
        try:
            self._move()
        except (BrokenPipeError, ValueError, OSError) as e:
            if not self._stopping.is_set():
                self.error = e

    def _move(self) -> None:
        raise NotImplementedError

    def _stderr(self) -> str:
        return self.process.stderr.read().decode(errors="replace").strip()[-2000:] if self.process.stderr else ""


class MeteredPut(_Metered):
    """`hdfs dfs -put - REMOTE`, fed incompressible bytes until `finish()`."""

    def __init__(self, cluster, remote: str, as_uid: int | None = None, hdfs_user: str | None = None):
        self._block = os.urandom(4 * CHUNK)
        super().__init__(cluster.start_shell("-put", "-f", "-", remote, as_uid=as_uid, hdfs_user=hdfs_user,
                                             stdin=subprocess.PIPE, text=False), f"put {remote}")

    def _move(self) -> None:
        offset = 0
        while not self._stopping.is_set():
            chunk = self._block[offset:offset + CHUNK]
            self.process.stdin.write(chunk)
            self._count(len(chunk))
            offset = (offset + CHUNK) % len(self._block)

    def finish(self, timeout: float = 180) -> None:
        """Stop feeding, close the file (the client flushes what it holds), check `-put` succeeded."""
        self._stopping.set()
        self._thread.join(timeout)
        try:
            self.process.stdin.close()
        except OSError:
            pass
        code = self.process.wait(timeout)
        if code != 0 or self.error:
            raise Unavailable(f"hdfs dfs -put failed (exit {code}, {self.error!r}): {self._stderr()}")


class MeteredCat(_Metered):
    """`hdfs dfs [OPTIONS] -cat PATHS...` (a path may repeat: read again), its output counted and dropped;
    OPTIONS are generic ones, e.g. ("-Ddfs.client.read.shortcircuit=false",)."""

    def __init__(self, cluster, paths: list[str], as_uid: int | None = None, hdfs_user: str | None = None,
                 options: tuple[str, ...] = ()):
        self.first_byte: float | None = None
        self.last_byte: float | None = None
        super().__init__(cluster.start_shell(*options, "-cat", *paths, as_uid=as_uid, hdfs_user=hdfs_user,
                                             text=False), f"cat {paths[0]}")

    def _move(self) -> None:
        out = self.process.stdout
        while chunk := out.read1(CHUNK):
            now = time.monotonic()
            self.first_byte = self.first_byte or now
            self.last_byte = now
            self._count(len(chunk))

    def finish(self, timeout: float = 300) -> float:
        """Wait for the end; the client's rate from its first byte to its last (JVM start excluded)."""
        code = self.process.wait(timeout)
        self._thread.join(10)
        if code != 0 or self.error:
            raise Unavailable(f"hdfs dfs -cat failed (exit {code}, {self.error!r}): {self._stderr()}")
        return self.bytes / (self.last_byte - self.first_byte) if self.bytes and self.last_byte > self.first_byte else 0.0

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        self._stopping.set()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._thread.join(10)


def counted(hdfs, direction: str) -> dict[tuple[str, str], int]:
    """(DataNode id, user) -> bytes its DataNode-side throttler passed for that user ("read" or "write")."""
    return {(dn.id, user): getattr(c, f"{direction}_bytes") for dn in hdfs.datanodes
            for user, c in ThrottleChannel(hdfs.throttle_socket(dn)).stats().users.items()}


def window(hdfs, meters: dict, direction: str, seconds: float) -> tuple[dict, dict]:
    """Over the same `seconds`: the clients' rates {key: bytes/s}, from the meters, and the DataNode
    throttlers' {(dn, user): bytes/s}, from their counters."""
    clients, nodes, t0 = {k: m.bytes for k, m in meters.items()}, counted(hdfs, direction), time.monotonic()
    time.sleep(seconds)
    clients_after, nodes_after = {k: m.bytes for k, m in meters.items()}, counted(hdfs, direction)
    elapsed = time.monotonic() - t0
    return ({k: (clients_after[k] - clients[k]) / elapsed for k in meters},
            {k: (v - nodes.get(k, 0)) / elapsed for k, v in nodes_after.items()})
