"""Fig. 5, D/PFS throttle: the MPI-IO Test reads from HDFS (one rank per DataNode, WebHDFS),
with every DataNode process in a VNode throttled at R MB/s on its own disk, vs no VNode
("W/O_VN"). With co-locality, rank i's file is on DataNode i (HDFS favoured nodes); without,
HDFS places each 128 MiB block itself, so some DataNodes serve two readers and some none.

    sudo .venv/bin/python -m benchmarks.mpiio.fig5_dpfs_throttle [--datanodes 3] [--rates 10,20,40,80]

Needs the HDFS testbed (testbed.hdfs_cluster; scripts/setup.d/hdfs.sh). All
DataNodes share this host, so "remote" reads cross loopback, not a network.
"""

import argparse
import os
import time

from benchmarks.mpiio import launch
from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import BENCH_PREFIX, VNodeSpec, bench_vnodes
from benchmarks.mpiio.experiment import MB, command_line, log, prepare_run
from benchmarks.mpiio.machine import describe
from testbed.sizes import parse_size

PLACEMENTS = ("co-located", "hdfs-placed")


def write_inputs(cluster, placement: str, ranks: int, size: int) -> list[str]:
    """Write one file per rank; returns where each file's blocks landed ("dn0+dn1", ...)."""
    where = []
    for rank in range(ranks):
        path = f"/bench/{placement}/mpiio.{rank}"
        favoured = cluster.datanodes[rank] if placement == "co-located" else None
        cluster.write_file(path, size, hdfs_user="bench", on_datanode=favoured)
        where.append("+".join(dn.id for block in cluster.block_datanodes(path) for dn in block))
    return where


def throttle_datanodes(cluster, vnodes, rate_mbps: int | None) -> None:
    """Each DataNode process in a VNode of its own, capped on its own disk; None: no VNode."""
    if rate_mbps is None:
        vnodes.configure(None, [])
        return
    specs = [VNodeSpec(f"vnode.{dn.id}", read_bps=rate_mbps * MB, device=dn.device_number)
             for dn in cluster.datanodes]
    vnodes.configure(None, specs)
    for dn in cluster.datanodes:
        vnodes.place_process(f"vnode.{dn.id}", dn.pid)


def measure(cluster, vnodes, args) -> list[dict]:
    ranks = len(cluster.datanodes)
    size = parse_size(args.size_per_process)
    layout = {p: write_inputs(cluster, p, ranks, size) for p in PLACEMENTS}
    log(f"block placement: {layout}")
    rows = []
    for rate in [None, *args.rates]:
        throttle_datanodes(cluster, vnodes, rate)
        for placement in PLACEMENTS:
            cluster.evict_page_cache()
            doc = launch.run(launch.MpiioRun(
                ranks, f"/bench/{placement}",
                ["--hdfs-url", f"http://{cluster.namenode.http_address}", "--hdfs-user", "bench",
                 "--ops", "read", "--object-size", args.object_size, "--size-per-process", args.size_per_process]))
            for r in launch.rank_rows(doc, throttle="W/O_VN" if rate is None else str(rate), placement=placement):
                rows.append({**r, "blocks_on": layout[placement][r["rank"]]})
            log(f"throttle {rate} {placement}: aggregate {rows[-1]['aggregate_mbps']} MB/s")
    return rows


def draw(rows: list[dict], ranks: int, rates: list[int]):
    def figure(plt):
        fig, ax = plt.subplots(figsize=(8, 4))
        cases = ["W/O_VN", *map(str, rates)]
        for j, placement in enumerate(PLACEMENTS):
            values = [next(r["aggregate_mbps"] for r in rows if (r["throttle"], r["placement"]) == (c, placement))
                      for c in cases]
            ax.bar([i - 0.2 + 0.4 * j for i in range(len(cases))], values, width=0.38,
                   label=placement, color=("tab:red", "tab:green")[j])
        for i, rate in enumerate(rates, start=1):
            ax.plot([i - 0.4, i + 0.4], [rate * ranks] * 2, color="black", linewidth=1)
        ax.set_xticks(range(len(cases)), cases)
        ax.set_xlabel("throttle per DataNode VNode, MB/s (black: DataNodes x throttle)")
        ax.set_ylabel("aggregate read MB/s")
        ax.set_yscale("log")
        ax.legend()
        return fig
    return figure


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datanodes", type=int, default=3)
    p.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[10, 20, 40, 80])
    p.add_argument("--size-per-process", default="256M")
    p.add_argument("--object-size", default="16M")
    p.add_argument("--out", default=report.RESULTS_DIR)
    args = p.parse_args()
    from vnode_sync.kernel.devices import scheduler
    from testbed.hdfs_cluster import HdfsCluster
    started = prepare_run("needs root: cgroups, loop devices, mounts")
    out = args.out
    disk_mb = max(1024, 2 * parse_size(args.size_per_process) * args.datanodes // (1 << 20) + 512)
    with HdfsCluster(f"{BENCH_PREFIX}.fig5.{os.getpid()}", datanodes=args.datanodes, disk_mb=disk_mb) as cluster, \
            bench_vnodes() as vnodes:
        rows = measure(cluster, vnodes, args)
        schedulers = {dn.id: scheduler(dn.device_number) for dn in cluster.datanodes}
        testbed = describe(", ".join(f"{dn.id}: {dn.loop_device} ({dn.device_number})" for dn in cluster.datanodes),
                           ", ".join(f"{k}: {v}" for k, v in schedulers.items()),
                           f"none: each DataNode on its own loop device over a file on the VM disk; "
                           f"HDFS, {args.datanodes} DataNodes, replication 1, WebHDFS reads")
    base = os.path.join(out, "fig5-dpfs-throttle")
    report.write_csv(base + ".csv", rows)
    report.write_plot(base + ".png", draw(rows, args.datanodes, args.rates))
    cases = ["W/O_VN", *map(str, args.rates)]
    table = report.markdown_table(
        ("throttle MB/s per DataNode", *(f"{p} aggregate MB/s" for p in PLACEMENTS), "DataNodes x throttle"),
        [(c, *(next(r["aggregate_mbps"] for r in rows if (r["throttle"], r["placement"]) == (c, p))
               for p in PLACEMENTS), "-" if c == "W/O_VN" else int(c) * args.datanodes) for c in cases])
    report.write_markdown(base + ".md", "Fig. 5: HDFS reads under per-DataNode VNode throttles", testbed,
                          command_line(), time.monotonic() - started,
                          [(f"{args.datanodes} ranks, {args.size_per_process} each, {args.object_size} reads", table)])
    log(f"wrote {base}.{{csv,png,md}} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
