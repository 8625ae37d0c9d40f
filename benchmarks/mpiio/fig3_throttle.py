"""Fig. 3, throttle isolation: 4 ranks in 4 VNodes, the first throttled (read and write) at
10, 20, 30, 40 MB/s, the others unlimited; "phy" runs the 4 ranks in no VNode. All ranks run
for the same stonewall window, so the throttled rank is measured next to busy peers.

    sudo .venv/bin/python -m benchmarks.mpiio.fig3_throttle [--stonewall 8]
"""

import os
import statistics

from benchmarks.mpiio import launch
from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import VNodeSpec
from benchmarks.mpiio.experiment import MB, clear_files, command_line, common_options, log, testbed

RANKS = 4
THROTTLES_MBPS = (10, 20, 30, 40)
OBJECT_SIZES = ("16K", "16M")
OPS = ("write", "read")


def cases() -> list[str]:
    return ["phy", *map(str, THROTTLES_MBPS)]


def measure(bed, args) -> list[dict]:
    rows = []
    for obj in OBJECT_SIZES:
        for case in cases():
            vnodes = []
            if case != "phy":
                limit = int(case) * MB
                specs = [VNodeSpec("vnode.bench0", read_bps=limit, write_bps=limit)]
                specs += [VNodeSpec(f"vnode.bench{r}") for r in range(1, RANKS)]
                vnodes = bed.vnodes.configure(bed.disk.device_number, specs)
            clear_files(bed.disk.mountpoint)
            doc = launch.run(launch.MpiioRun(
                RANKS, bed.disk.mountpoint,
                ["--pattern", "n-n", "--ops", ",".join(OPS), "--object-size", obj, "--size-per-process", "1G",
                 "--stonewall", str(args.stonewall), "--direct", "--drop-caches"],
                vnodes, bed.vnodes.root_name))
            rows += launch.rank_rows(doc, object_size=obj, throttle=case)
            log(f"{obj} throttle {case}: " + "; ".join(
                f"{op} " + " ".join(str(r["mbps"]) for r in rows if r["object_size"] == obj and
                                    r["throttle"] == case and r["op"] == op) for op in OPS))
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for op in OPS:
        for obj in OBJECT_SIZES:
            for case in cases():
                ranks = sorted((r for r in rows if (r["op"], r["object_size"], r["throttle"]) == (op, obj, case)),
                               key=lambda r: r["rank"])
                out.append({"op": op, "object_size": obj, "throttle": case,
                            "first_mbps": ranks[0]["mbps"],
                            "peers_mean_mbps": round(statistics.mean(r["mbps"] for r in ranks[1:]), 2),
                            "aggregate_mbps": ranks[0]["aggregate_mbps"],
                            "per_rank": [r["mbps"] for r in ranks]})
    return out


def draw(cells: list[dict]):
    def figure(plt):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        colours = ["tab:red", "tab:blue", "tab:cyan", "tab:gray"]
        for ax, op in zip(axes, OPS):
            mine = [c for c in cells if c["op"] == op]
            bottoms = [0.0] * len(mine)
            for rank in range(RANKS):
                values = [c["per_rank"][rank] for c in mine]
                ax.bar(range(len(mine)), values, bottom=bottoms, color=colours[rank],
                       label="throttled VNode" if rank == 0 else f"peer {rank}")
                bottoms = [b + v for b, v in zip(bottoms, values)]
            for i, c in enumerate(mine):
                if c["throttle"] != "phy":
                    ax.plot([i - 0.4, i + 0.4], [int(c["throttle"])] * 2, color="black", linewidth=1.5)
            ax.set_xticks(range(len(mine)), [f"{c['object_size']}\n{c['throttle']}" for c in mine], fontsize=8)
            ax.set_title(f"{op} (black line: throttle of the red VNode)")
        axes[0].set_ylabel("MB/s (stacked per rank)")
        axes[1].legend(fontsize=8)
        return fig
    return figure


def main() -> None:
    p = common_options(__doc__)
    p.add_argument("--stonewall", type=float, default=8.0, help="seconds every rank does I/O per phase")
    args = p.parse_args()
    out = args.out
    with testbed(args, "fig3") as bed:
        rows = measure(bed, args)
        cells = summary(rows)
        base = os.path.join(out, "fig3-throttle")
        report.write_csv(base + ".csv", rows)
        report.write_plot(base + ".png", draw(cells))
        table = report.markdown_table(
            ("op", "object", "throttle MB/s", "throttled VNode MB/s", "peers, mean MB/s", "aggregate MB/s"),
            [(c["op"], c["object_size"], c["throttle"], c["first_mbps"], c["peers_mean_mbps"], c["aggregate_mbps"])
             for c in cells])
        report.write_markdown(base + ".md", "Fig. 3: throttle isolation (4 ranks, N-to-N, O_DIRECT)", bed.record,
                              command_line(), bed.elapsed(),
                              [(f"Per-rank bandwidth over a {args.stonewall:g} s stonewall window", table)])
        log(f"wrote {base}.{{csv,png,md}} in {bed.elapsed():.0f} s")


if __name__ == "__main__":
    main()
