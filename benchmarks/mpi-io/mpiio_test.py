"""MPI-IO Test in the spirit of LANL's (the paper's benchmark, ref. [5]), on mpi4py.

Every rank writes and/or reads `--size-per-process` bytes in objects of `--object-size`:
N-to-N (a file per rank) or N-to-1 (one shared file, objects strided by rank, as MPI-IO Test
lays them out). Timing runs from a barrier to the rank's last byte (and its fsync for writes);
aggregate bandwidth is all bytes over the span from the first start to the last end.

    mpirun -n 4 python mpiio_test.py --dir /mnt/x --pattern n-n --ops write,read \\
        --object-size 16M --size-per-process 256M --direct --drop-caches

Options that matter for block-I/O QoS:
  --direct        O_DIRECT (posix API): cgroup v1 charges a VNode only for I/O its thread
                  issues; buffered writes are flushed later by kernel threads and escape.
  --drop-caches   rank 0 syncs and drops the page cache before each read phase.
  --stonewall S   each rank stops after S seconds, so all ranks contend for the whole window
                  (reads wrap around the file; with --direct they still hit the disk).
  --vnodes        comma list, one VNode per rank ("" = none); each rank moves its own I/O
                  thread there with BlkioV1Backend.place before the first barrier.
  --background-ranks  these ranks read (wrapping) until every other rank has finished its
                  data, as competing load; the others' times are the result (paper fig. 6).
  --hdfs-url      read from HDFS over WebHDFS instead of a local file system (read only).

Rank 0 prints one JSON document with per-rank and aggregate results.
"""

import argparse
import json
import mmap
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

from mpi4py import MPI

from testbed.sizes import parse_size

MB = 1_000_000
FOREGROUND_DONE = 77


@dataclass
class Workload:
    directory: str
    pattern: str                 # "n-n" or "n-1"
    ops: list[str]               # subset of write, read, in order
    object_size: int
    size_per_process: int
    api: str = "posix"           # "posix" or "mpiio"
    direct: bool = False
    drop_caches: bool = False
    stonewall: float = 0.0
    hdfs_url: str = ""
    hdfs_user: str = "bench"
    background_ranks: list[int] = field(default_factory=list)


@dataclass
class RankResult:
    rank: int
    op: str
    bytes: int
    start: float
    end: float
    vnode: str = ""

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)

    @property
    def mbps(self) -> float:
        return self.bytes / self.seconds / MB


@dataclass
class PhaseResult:
    op: str
    nprocs: int
    aggregate_mbps: float
    seconds: float
    total_bytes: int
    ranks: list[dict] = field(default_factory=list)


def file_for(work: Workload, rank: int) -> str:
    name = f"mpiio.{rank}" if work.pattern == "n-n" else "mpiio.shared"
    return os.path.join(work.directory, name)


def offset_of(work: Workload, rank: int, nprocs: int, index: int) -> int:
    if work.pattern == "n-n":
        return index * work.object_size
    return (index * nprocs + rank) * work.object_size


def drop_page_cache() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


class PosixFile:
    """pread/pwrite on an fd; the buffer is an anonymous mmap, so page-aligned for O_DIRECT."""

    def __init__(self, path: str, op: str, direct: bool):
        flags = os.O_RDONLY if op == "read" else os.O_WRONLY | os.O_CREAT
        if direct:
            flags |= os.O_DIRECT
        self.fd = os.open(path, flags, 0o644)
        self.op = op

    def transfer(self, buf: mmap.mmap, offset: int) -> int:
        if self.op == "read":
            return os.preadv(self.fd, [buf], offset)
        return os.pwritev(self.fd, [buf], offset)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        if self.op == "write":
            os.fsync(self.fd)
        os.close(self.fd)


class MpiioFile:
    """MPI_File_{read,write}_at; independent I/O, MPI_File_sync before close for writes."""

    def __init__(self, path: str, op: str, comm: MPI.Comm):
        amode = MPI.MODE_RDONLY if op == "read" else MPI.MODE_WRONLY | MPI.MODE_CREATE
        self.fh = MPI.File.Open(comm, path, amode)
        self.op = op

    def transfer(self, buf: mmap.mmap, offset: int) -> int:
        if self.op == "read":
            status = MPI.Status()
            self.fh.Read_at(offset, buf, status)
            return status.Get_count(MPI.BYTE)
        self.fh.Write_at(offset, buf)
        return len(buf)

    def size(self) -> int:
        return self.fh.Get_size()

    def close(self) -> None:
        if self.op == "write":
            self.fh.Sync()
        self.fh.Close()


class WebHdfsFile:
    """Sequential reads of /<dir>/mpiio.<rank> through WebHDFS (the DataNode streams the block)."""

    def __init__(self, work: Workload, rank: int):
        import urllib.request
        path = file_for(work, rank)
        url = f"{work.hdfs_url.rstrip('/')}/webhdfs/v1{path}?op=OPEN&user.name={work.hdfs_user}"
        self.stream = urllib.request.urlopen(url, timeout=600)
        self.op = "read"

    def transfer(self, buf: mmap.mmap, offset: int) -> int:
        view = memoryview(buf)
        got = 0
        while got < len(buf):
            n = self.stream.readinto(view[got:])
            if not n:
                break
            got += n
        return got

    def size(self) -> int:
        return 1 << 62

    def close(self) -> None:
        self.stream.close()


def open_file(work: Workload, op: str, rank: int, comm: MPI.Comm):
    if work.hdfs_url:
        if op != "read":
            raise SystemExit("--hdfs-url supports reads only")
        return WebHdfsFile(work, rank)
    path = file_for(work, rank)
    if work.api == "mpiio":
        return MpiioFile(path, op, MPI.COMM_SELF if work.pattern == "n-n" else comm)
    return PosixFile(path, op, work.direct)


def run_phase(work: Workload, op: str, comm: MPI.Comm, vnode: str) -> RankResult:
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    buf = mmap.mmap(-1, work.object_size)
    if op == "write":
        buf.write(bytes([rank % 251 + 1]) * work.object_size)
    if op == "read" and work.drop_caches and not work.hdfs_url:
        comm.Barrier()
        if rank == 0:
            drop_page_cache()
    handle = open_file(work, op, rank, comm)
    objects = work.size_per_process // work.object_size
    # Reads wrap around a shorter file: with a stonewall a rank may read more than was written.
    file_size = handle.size() if op == "read" else 0
    span = max(1, (file_size // (work.object_size * (nprocs if work.pattern == "n-1" else 1))))
    done = 0
    comm.Barrier()
    start = time.time()
    deadline = start + work.stonewall if work.stonewall else float("inf")
    # A stonewalled or background read keeps going (wrapping) until the deadline or until the
    # foreground ranks are done; everything else stops after size_per_process bytes.
    background = op == "read" and rank in work.background_ranks
    foreground = [r for r in range(nprocs) if r not in work.background_ranks]
    keep_reading = op == "read" and (bool(work.stonewall) or background)
    finished = 0
    index = 0
    while time.time() < deadline and (index < objects or keep_reading):
        if background:
            while comm.Iprobe(source=MPI.ANY_SOURCE, tag=FOREGROUND_DONE):
                comm.recv(source=MPI.ANY_SOURCE, tag=FOREGROUND_DONE)
                finished += 1
            if finished == len(foreground):
                break
        position = index % span if op == "read" else index
        n = handle.transfer(buf, offset_of(work, rank, nprocs, position))
        if n <= 0:
            break
        done += n
        index += 1
    if op == "read" and not background:
        for other in work.background_ranks:
            comm.send(rank, dest=other, tag=FOREGROUND_DONE)
    end = time.time()
    handle.close()
    if op == "write":
        end = time.time()  # a write is done when its fsync is
    elif background:
        while finished < len(foreground):  # drain, so no message leaks into the next phase
            comm.recv(source=MPI.ANY_SOURCE, tag=FOREGROUND_DONE)
            finished += 1
    buf.close()
    comm.Barrier()
    return RankResult(rank, op, done, start, end, vnode)


def join_vnode(hierarchy: str, root_name: str, vnode: str) -> None:
    from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
    BlkioV1Backend(mount=hierarchy, root_name=root_name).place(vnode, threading.get_native_id())


def summarise(op: str, results: list[RankResult]) -> PhaseResult:
    start = min(r.start for r in results)
    end = max(r.end for r in results)
    total = sum(r.bytes for r in results)
    ranks = [dict(asdict(r), seconds=r.seconds, mbps=r.mbps) for r in results]
    return PhaseResult(op, len(results), total / max(end - start, 1e-9) / MB, end - start, total, ranks)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="directory for the files (an HDFS path with --hdfs-url)")
    p.add_argument("--pattern", choices=("n-n", "n-1"), default="n-n")
    p.add_argument("--ops", default="write,read", help="phases in order: write, read or both")
    p.add_argument("--object-size", type=parse_size, default=parse_size("16M"))
    p.add_argument("--size-per-process", type=parse_size, default=parse_size("256M"))
    p.add_argument("--api", choices=("posix", "mpiio"), default="posix")
    p.add_argument("--direct", action="store_true")
    p.add_argument("--drop-caches", action="store_true")
    p.add_argument("--stonewall", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--vnodes", default="", help="comma list of VNode names, one per rank")
    p.add_argument("--vnode-root", default="", help="cgroup under the hierarchy that holds the VNodes")
    p.add_argument("--hierarchy", default="/sys/fs/cgroup/blkio")
    p.add_argument("--background-ranks", default="", help="comma list of ranks that only compete")
    p.add_argument("--hdfs-url", default="", help="WebHDFS base, e.g. http://127.0.0.1:9870")
    p.add_argument("--hdfs-user", default="bench")
    p.add_argument("--json", default="", help="also write the result document here")
    args = p.parse_args(argv)
    if args.object_size <= 0 or args.size_per_process < args.object_size:
        p.error(f"need 0 < object size ({args.object_size}) <= size per process ({args.size_per_process})")
    if args.direct and args.api != "posix":
        p.error("--direct applies to the posix API only (MPI-IO has no O_DIRECT mode)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    work = Workload(args.dir, args.pattern, [o for o in args.ops.split(",") if o], args.object_size,
                    args.size_per_process, args.api, args.direct, args.drop_caches, args.stonewall,
                    args.hdfs_url, args.hdfs_user,
                    [int(r) for r in args.background_ranks.split(",") if r])
    vnodes = args.vnodes.split(",") if args.vnodes else []
    if vnodes and len(vnodes) != nprocs:
        raise SystemExit(f"--vnodes names {len(vnodes)} VNodes for {nprocs} ranks")
    vnode = vnodes[rank] if vnodes else ""
    if vnode:
        join_vnode(args.hierarchy, args.vnode_root, vnode)
    phases = []
    for op in work.ops:
        results = comm.gather(run_phase(work, op, comm, vnode), root=0)
        if rank == 0:
            phases.append(asdict(summarise(op, results)))
    if rank == 0:
        doc = {"nprocs": nprocs, "workload": asdict(work), "phases": phases}
        text = json.dumps(doc)
        print(text, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text)


if __name__ == "__main__":
    main()
