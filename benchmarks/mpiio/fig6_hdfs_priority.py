"""Fig. 6 on HDFS: a high-priority reader (uid 64101, "paraview") reads a file from a DataNode
while two background readers (uid 64102, "daemons") re-read theirs from the same DataNode.
As VNode Sync does, each DataXceiver thread is placed in the VNode of the user it serves
(found by `HdfsDiscovery` from the client socket's uid); the daemons' VNode is throttled
at 5 to 160 MB/s on the DataNode's disk. Reported: the high-priority reader's
transfer time (the client's own measurement, JVM start excluded), vs alone ("W/O_DM")
and vs unthrottled background ("W/O_THTL").

    sudo .venv/bin/python -m benchmarks.mpiio.fig6_hdfs_priority [--size 256M]

Readers are the testbed's native HDFS clients, not MPI ranks: WebHDFS reads are served
for the DataNode's own internal client, so their threads cannot be told apart per user.
"""

import argparse
import contextlib
import os
import threading
import time

from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import BENCH_PREFIX, BenchVNodes, VNodeSpec, bench_vnodes
from benchmarks.mpiio.experiment import MB, command_line, log, prepare_run
from benchmarks.mpiio.machine import describe
from testbed.sizes import parse_size
from vnode_sync.errors import KernelError

# The paper's rates, then higher: this DataNode's disk is a fast loop device, not an HDD.
THROTTLES_MBPS = (5, 10, 20, 40, 80, 160)
USERS = {64101: "paraview", 64102: "daemons"}


class HandlerPlacer:
    """Polls a DataNode's handler threads and moves each into its user's VNode (2 ms steps)."""

    def __init__(self, vnodes: BenchVNodes, discovery, identity):
        self.vnodes, self.discovery, self.identity = vnodes, discovery, identity
        self.placed: dict[int, str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.discovery.wait_for_change(0.002)
            for handler in self.discovery.scan(self.identity):
                vnode = f"vnode.{handler.user}" if handler.user else None
                if vnode and self.placed.get(handler.tid) != vnode:
                    with contextlib.suppress(KernelError):
                        self.vnodes.backend.place(vnode, handler.tid)
                        self.placed[handler.tid] = vnode

    def __enter__(self) -> "HandlerPlacer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(5)


def one_case(cluster, case: str, size_label: str) -> tuple[float, float]:
    """(high-priority seconds, background MB/s total while it ran)."""
    cluster.evict_page_cache()
    background = []
    if case != "W/O_DM":
        background = [cluster.start_read(f"/daemons/{name}.bin", as_uid=64102, hdfs_user="daemons", seconds=600)
                      for name in ("a", "b")]
        time.sleep(3)  # JVM start, so the daemons are reading when the high-priority job starts
    try:
        hipri = cluster.read_file("/paraview/data.bin", as_uid=64101, hdfs_user="paraview")
    finally:
        for reader in background:
            reader.terminate()
        for reader in background:
            with contextlib.suppress(Exception):
                reader.communicate(timeout=10)
    log(f"{case}: high-priority read of {size_label} took {hipri.seconds:.2f} s "
        f"({hipri.bytes_per_second / MB:.1f} MB/s)")
    return hipri.seconds, hipri.bytes_per_second / MB


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="256M")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=report.RESULTS_DIR)
    args = p.parse_args()
    from vnode_sync.agents.handlers.base import UserDirectory
    from vnode_sync.agents.handlers.hdfs import HdfsDiscovery
    from vnode_sync.kernel.devices import scheduler
    from testbed.hdfs_cluster import HdfsCluster
    started = prepare_run("needs root: cgroups, loop devices, mounts, clients as other uids")
    out = args.out
    size = parse_size(args.size)
    rows = []
    cases = ["W/O_DM", *map(str, THROTTLES_MBPS), "W/O_THTL"]
    with HdfsCluster(f"{BENCH_PREFIX}.fig6.{os.getpid()}", datanodes=1, disk_mb=max(1024, 8 * size // (1 << 20) + 512)) as cluster, \
            bench_vnodes() as vnodes:
        dn = cluster.datanodes[0]
        cluster.write_file("/paraview/data.bin", size, hdfs_user="paraview")
        # Three times larger, so no daemon finishes a pass and re-reads from the page cache.
        for name in ("a", "b"):
            cluster.write_file(f"/daemons/{name}.bin", 3 * size, hdfs_user="daemons")
        discovery = HdfsDiscovery(cmdline_contains=os.path.join(cluster.workdir, "conf", dn.id) + ":",
                                  spawner_in_default=False)  # the placer leaves unidentified threads alone
        identity = UserDirectory(users_by_uid=dict(USERS))
        testbed = describe(f"{dn.id}: {dn.loop_device} ({dn.device_number})", scheduler(dn.device_number) or "?",
                           "none: the DataNode's loop device over a file on the VM disk; 1 DataNode, "
                           "native HDFS clients")
        try:
            for repeat in range(args.repeats):
                for case in cases:
                    limit = 0 if case in ("W/O_DM", "W/O_THTL") else int(case) * MB
                    vnodes.configure(dn.device_number, [VNodeSpec("vnode.paraview"),
                                                        VNodeSpec("vnode.daemons", read_bps=limit)])
                    with HandlerPlacer(vnodes, discovery, identity) as placer:
                        seconds, mbps = one_case(cluster, case, args.size)
                    rows.append({"repeat": repeat, "case": case, "hipri_seconds": round(seconds, 2),
                                 "hipri_mbps": round(mbps, 1), "handlers_placed": len(placer.placed)})
        finally:
            discovery.close()
    alone = sum(r["hipri_seconds"] for r in rows if r["case"] == "W/O_DM") / args.repeats
    cells = []
    for case in cases:
        mine = [r for r in rows if r["case"] == case]
        seconds = sum(r["hipri_seconds"] for r in mine) / len(mine)
        cells.append((case, round(seconds, 2), round(seconds / alone, 2), min(r["handlers_placed"] for r in mine)))
    base = os.path.join(out, "fig6-hdfs-priority")
    report.write_csv(base + ".csv", rows)
    report.write_plot(base + ".png", lambda plt: _draw(plt, cells))
    table = report.markdown_table(("background throttle", "high-priority s", "vs alone", "handler threads placed"),
                                  cells)
    report.write_markdown(base + ".md", "Fig. 6 on HDFS: priority scenario with per-user DataNode handler VNodes",
                          testbed, command_line(), time.monotonic() - started,
                          [(f"High-priority reader reads {args.size}; mean of {args.repeats} runs", table)])
    log(f"wrote {base}.{{csv,png,md}} in {time.monotonic() - started:.0f} s")


def _draw(plt, cells):
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(range(len(cells)), [c[1] for c in cells],
           color=["tab:green"] + ["tab:blue"] * (len(cells) - 2) + ["tab:red"])
    ax.set_xticks(range(len(cells)), [c[0] for c in cells])
    ax.set_xlabel("throttle on the background users' VNode, MB/s")
    ax.set_ylabel("high-priority HDFS read, s")
    return fig


if __name__ == "__main__":
    main()
