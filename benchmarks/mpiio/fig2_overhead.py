"""Fig. 2, overhead: N ranks (1, 2, 4, 8), N-to-N, 16 KiB and 16 MiB objects, write then read,
each rank in its own (unlimited) VNode vs in none; VNode bandwidth normalised to no-VNode.

    sudo .venv/bin/python -m benchmarks.mpiio.fig2_overhead [--size-per-process 64M] [--repeats 2]
"""

import os
import statistics

from benchmarks.mpiio import launch
from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import VNodeSpec
from benchmarks.mpiio.experiment import clear_files, command_line, common_options, log, testbed
from testbed.sizes import parse_size

PROCESS_COUNTS = (1, 2, 4, 8)
OBJECT_SIZES = ("16K", "16M")
OPS = ("write", "read")


def measure(bed, args) -> list[dict]:
    rows = []
    for repeat in range(args.repeats):
        for obj in OBJECT_SIZES:
            for n in PROCESS_COUNTS:
                # Alternate which mode goes first so drift (tmpfs growth, ext4 layout) cancels.
                modes = ("none", "vnode") if (repeat + n) % 2 == 0 else ("vnode", "none")
                for mode in modes:
                    vnodes = []
                    if mode == "vnode":
                        vnodes = bed.vnodes.configure(bed.disk.device_number,
                                                      [VNodeSpec(f"vnode.bench{r}") for r in range(n)])
                    clear_files(bed.disk.mountpoint)
                    doc = launch.run(launch.MpiioRun(
                        n, bed.disk.mountpoint, ["--pattern", "n-n", "--ops", ",".join(OPS), "--object-size", obj,
                                                 "--size-per-process", args.size_per_process, "--direct",
                                                 "--drop-caches"],
                        vnodes, bed.vnodes.root_name))
                    for op in OPS:
                        p = launch.phase(doc, op)
                        rows.append({"repeat": repeat, "object_size": obj, "nprocs": n, "mode": mode, "op": op,
                                     "aggregate_mbps": round(p["aggregate_mbps"], 2),
                                     "seconds": round(p["seconds"], 3), "bytes": p["total_bytes"]})
                    log(f"rep {repeat} {obj} n={n} {mode}: " + ", ".join(
                        f"{r['op']} {r['aggregate_mbps']} MB/s" for r in rows[-2:]))
    return rows


def normalised(rows: list[dict]) -> list[dict]:
    out = []
    for op in OPS:
        for obj in OBJECT_SIZES:
            for n in PROCESS_COUNTS:
                def runs(mode):
                    return [r["aggregate_mbps"] for r in rows
                            if (r["op"], r["object_size"], r["nprocs"], r["mode"]) == (op, obj, n, mode)]
                none, vnode = runs("none"), runs("vnode")
                # Run-to-run spread of each mode, as a fraction of its mean: other tenants share the cores.
                spread = max((max(v) - min(v)) / statistics.mean(v) for v in (none, vnode))
                out.append({"op": op, "object_size": obj, "nprocs": n, "none_mbps": round(statistics.mean(none), 1),
                            "vnode_mbps": round(statistics.mean(vnode), 1),
                            "normalised": round(statistics.mean(vnode) / statistics.mean(none), 3),
                            "low": round(min(vnode) / max(none), 3), "high": round(max(vnode) / min(none), 3),
                            "spread": round(spread, 2)})
    return out


def draw(summary: list[dict]):
    def figure(plt):
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
        for ax, op in zip(axes, OPS):
            cells = [s for s in summary if s["op"] == op]
            labels = [f"{s['nprocs']}p\n{s['object_size']}" for s in cells]
            ax.bar(range(len(cells)), [s["normalised"] for s in cells],
                   yerr=[[s["normalised"] - s["low"] for s in cells], [s["high"] - s["normalised"] for s in cells]],
                   capsize=3, color=["tab:blue" if s["object_size"] == "16K" else "tab:orange" for s in cells])
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_xticks(range(len(cells)), labels, fontsize=8)
            ax.set_title(f"{op}: VNode / no VNode (bars: worst/best run pairs)")
        axes[0].set_ylabel("aggregate bandwidth, normalised")
        return fig
    return figure


def main() -> None:
    p = common_options(__doc__)
    p.add_argument("--size-per-process", default="64M")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    parse_size(args.size_per_process)
    out = args.out
    with testbed(args, "fig2") as bed:
        rows = measure(bed, args)
        summary = normalised(rows)
        base = os.path.join(out, "fig2-overhead")
        report.write_csv(base + ".csv", rows)
        report.write_plot(base + ".png", draw(summary))
        table = report.markdown_table(
            ("op", "object", "procs", "no VNode MB/s", "VNode MB/s", "VNode / none", "range over runs",
             "run-to-run spread"),
            [(s["op"], s["object_size"], s["nprocs"], s["none_mbps"], s["vnode_mbps"], s["normalised"],
              f"{s['low']:.2f}-{s['high']:.2f}", f"{100 * s['spread']:.0f} %")
             for s in summary])
        report.write_markdown(base + ".md", "Fig. 2: VNode overhead (N-to-N, O_DIRECT)", bed.record, command_line(),
                              bed.elapsed(), [(f"Aggregate bandwidth, mean of {args.repeats} runs, "
                                               f"{args.size_per_process} per process", table)])
        log(f"wrote {base}.{{csv,png,md}} in {bed.elapsed():.0f} s")


if __name__ == "__main__":
    main()
