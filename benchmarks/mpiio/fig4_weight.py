"""Fig. 4, weight isolation: 1-4 ranks, each in its own VNode with a BFQ weight, shares
100%; 50/50; 50/25/25; 40/20/20/20 (weight = 10 x percent). Each rank's bandwidth is
normalised to the aggregate of the same number of ranks in no VNode ("phy").

    sudo .venv/bin/python -m benchmarks.mpiio.fig4_weight [--stonewall 8]
"""

import os

from benchmarks.mpiio import launch
from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import VNodeSpec
from benchmarks.mpiio.experiment import clear_files, command_line, common_options, log, testbed

SHARES_PERCENT = {1: (100,), 2: (50, 50), 3: (50, 25, 25), 4: (40, 20, 20, 20)}
OBJECT_SIZES = ("16K", "16M")
OPS = ("write", "read")


def run_once(bed, args, obj: str, n: int, weighted: bool) -> dict:
    vnodes = []
    if weighted:
        specs = [VNodeSpec(f"vnode.bench{r}", weight=10 * pct) for r, pct in enumerate(SHARES_PERCENT[n])]
        vnodes = bed.vnodes.configure(bed.disk.device_number, specs)
    clear_files(bed.disk.mountpoint)
    return launch.run(launch.MpiioRun(
        n, bed.disk.mountpoint,
        ["--pattern", "n-n", "--ops", ",".join(OPS), "--object-size", obj, "--size-per-process", "2G",
         "--stonewall", str(args.stonewall), "--direct", "--drop-caches"],
        vnodes, bed.vnodes.root_name))


def measure(bed, args) -> list[dict]:
    rows = []
    for obj in OBJECT_SIZES:
        for n, shares in SHARES_PERCENT.items():
            phy = run_once(bed, args, obj, n, weighted=False)
            weighted = run_once(bed, args, obj, n, weighted=True)
            for op in OPS:
                phy_agg = launch.phase(phy, op)["aggregate_mbps"]
                for r in launch.phase(weighted, op)["ranks"]:
                    rows.append({"object_size": obj, "vnodes": n, "op": op, "rank": r["rank"],
                                 "share_percent": shares[r["rank"]], "weight": 10 * shares[r["rank"]],
                                 "mbps": round(r["mbps"], 2), "phy_aggregate_mbps": round(phy_agg, 2),
                                 "normalised": round(r["mbps"] / phy_agg, 3)})
            log(f"{obj} {n} VNodes: " + "; ".join(
                f"{op} " + " ".join(f"{r['share_percent']}%->{r['normalised']:.2f}" for r in rows
                                    if (r["object_size"], r["vnodes"], r["op"]) == (obj, n, op)) for op in OPS))
    return rows


def draw(rows: list[dict]):
    def figure(plt):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        colours = ["tab:red", "tab:blue", "tab:cyan", "tab:gray"]
        for ax, op in zip(axes, OPS):
            groups = [(obj, n) for obj in OBJECT_SIZES for n in SHARES_PERCENT]
            for i, (obj, n) in enumerate(groups):
                mine = sorted((r for r in rows if (r["object_size"], r["vnodes"], r["op"]) == (obj, n, op)),
                              key=lambda r: r["rank"])
                width = 0.8 / n
                for j, r in enumerate(mine):
                    x = i - 0.4 + width * (j + 0.5)
                    ax.bar(x, r["normalised"], width=width * 0.9, color=colours[j])
                    ax.plot([x - width / 2, x + width / 2], [r["share_percent"] / 100] * 2, color="black")
            ax.set_xticks(range(len(groups)), [f"{obj}\n{n} VN" for obj, n in groups], fontsize=8)
            ax.set_title(f"{op} (black: configured share)")
        axes[0].set_ylabel("rank MB/s / no-VNode aggregate")
        return fig
    return figure


def main() -> None:
    p = common_options(__doc__)
    p.add_argument("--stonewall", type=float, default=8.0, help="seconds every rank does I/O per phase")
    args = p.parse_args()
    if args.scheduler != "bfq":
        log(f"weights need BFQ; with {args.scheduler} the VNodes will share equally")
    out = args.out
    with testbed(args, "fig4") as bed:
        rows = measure(bed, args)
        base = os.path.join(out, "fig4-weight")
        report.write_csv(base + ".csv", rows)
        report.write_plot(base + ".png", draw(rows))
        table = report.markdown_table(
            ("op", "object", "VNodes", "shares %", "measured (normalised)", "sum", "no-VNode aggregate MB/s"),
            [(op, obj, n, "/".join(map(str, SHARES_PERCENT[n])),
              " / ".join(f"{r['normalised']:.2f}" for r in mine), f"{sum(r['normalised'] for r in mine):.2f}",
              mine[0]["phy_aggregate_mbps"])
             for op in OPS for obj in OBJECT_SIZES for n in SHARES_PERCENT
             for mine in [sorted((r for r in rows if (r["op"], r["object_size"], r["vnodes"]) == (op, obj, n)),
                                 key=lambda r: r["rank"])]])
        report.write_markdown(base + ".md", "Fig. 4: BFQ weight isolation (N-to-N, O_DIRECT)", bed.record,
                              command_line(), bed.elapsed(),
                              [(f"Rank bandwidth / no-VNode aggregate, {args.stonewall:g} s stonewall window", table)])
        log(f"wrote {base}.{{csv,png,md}} in {bed.elapsed():.0f} s")


if __name__ == "__main__":
    main()
