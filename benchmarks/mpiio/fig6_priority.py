"""Fig. 6, priority scenario: a high-priority reader (rank 0, its own unlimited VNode) reads a
fixed amount while two background readers (ranks 1 and 2, together in one VNode) read
continuously, throttled at 5, 10, 20, 40 MB/s. Reported: the high-priority reader's finish
time, next to running alone ("W/O_DM") and next to unthrottled background ("W/O_THTL").

    sudo .venv/bin/python -m benchmarks.mpiio.fig6_priority [--size 192M]

This runs on the emulated local disk: the paper ran ParaView against HDFS; the block-level
mechanism (one VNode throttled, the other not, one contended disk) is the same. The HDFS
variant needs DataNode handler threads placed per user, see results/README.md.
"""

import os

from benchmarks.mpiio import launch
from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import VNodeSpec
from benchmarks.mpiio.experiment import MB, clear_files, command_line, common_options, log, testbed

THROTTLES_MBPS = (5, 10, 20, 40)


def cases() -> list[str]:
    return ["W/O_DM", *map(str, THROTTLES_MBPS), "W/O_THTL"]


def read_once(bed, args, case: str) -> dict:
    nprocs = 1 if case == "W/O_DM" else 3
    vnodes = []
    if case not in ("W/O_DM", "W/O_THTL"):
        limit = int(case) * MB
        bed.vnodes.configure(bed.disk.device_number, [VNodeSpec("vnode.hipri"),
                                                     VNodeSpec("vnode.background", read_bps=limit)])
        vnodes = ["vnode.hipri", "vnode.background", "vnode.background"]
    else:
        bed.vnodes.configure(bed.disk.device_number, [])
    options = ["--pattern", "n-n", "--ops", "read", "--object-size", args.object_size,
               "--size-per-process", args.size, "--direct", "--drop-caches"]
    if nprocs > 1:
        options += ["--background-ranks", "1,2"]
    return launch.run(launch.MpiioRun(nprocs, bed.disk.mountpoint, options, vnodes, bed.vnodes.root_name))


def measure(bed, args) -> list[dict]:
    clear_files(bed.disk.mountpoint)
    launch.run(launch.MpiioRun(3, bed.disk.mountpoint, ["--pattern", "n-n", "--ops", "write", "--object-size",
                                                         args.object_size, "--size-per-process", args.size,
                                                         "--direct"]))
    rows = []
    for repeat in range(args.repeats):
        for case in cases():
            doc = read_once(bed, args, case)
            ranks = launch.phase(doc, "read")["ranks"]
            hipri = next(r for r in ranks if r["rank"] == 0)
            background = [r for r in ranks if r["rank"] != 0]
            rows.append({"repeat": repeat, "case": case, "hipri_seconds": round(hipri["seconds"], 2),
                         "hipri_mbps": round(hipri["mbps"], 2),
                         "background_mbps_total": round(sum(r["mbps"] for r in background), 2)})
            log(f"{case}: high-priority reader {rows[-1]['hipri_seconds']} s ({rows[-1]['hipri_mbps']} MB/s), "
                f"background {rows[-1]['background_mbps_total']} MB/s")
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    alone = sum(r["hipri_seconds"] for r in rows if r["case"] == "W/O_DM") / max(1, sum(r["case"] == "W/O_DM" for r in rows))
    for case in cases():
        mine = [r for r in rows if r["case"] == case]
        seconds = sum(r["hipri_seconds"] for r in mine) / len(mine)
        out.append({"case": case, "hipri_seconds": round(seconds, 2), "relative_to_alone": round(seconds / alone, 2),
                    "background_mbps_total": round(sum(r["background_mbps_total"] for r in mine) / len(mine), 1)})
    return out


def draw(cells: list[dict]):
    def figure(plt):
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(range(len(cells)), [c["hipri_seconds"] for c in cells],
               color=["tab:green"] + ["tab:blue"] * len(THROTTLES_MBPS) + ["tab:red"])
        ax.set_xticks(range(len(cells)), [c["case"] for c in cells])
        ax.set_xlabel("throttle on the background VNode, MB/s")
        ax.set_ylabel("high-priority reader finish time, s")
        return fig
    return figure


def main() -> None:
    p = common_options(__doc__)
    p.add_argument("--size", default="192M", help="what the high-priority reader reads")
    p.add_argument("--object-size", default="16M")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    out = args.out
    with testbed(args, "fig6") as bed:
        rows = measure(bed, args)
        cells = summary(rows)
        base = os.path.join(out, "fig6-priority")
        report.write_csv(base + ".csv", rows)
        report.write_plot(base + ".png", draw(cells))
        table = report.markdown_table(
            ("background throttle", "high-priority finish s", "vs alone", "background total MB/s"),
            [(c["case"], c["hipri_seconds"], c["relative_to_alone"], c["background_mbps_total"]) for c in cells])
        report.write_markdown(base + ".md", "Fig. 6: priority scenario (local emulated disk, O_DIRECT)", bed.record,
                              command_line(), bed.elapsed(),
                              [(f"High-priority reader reads {args.size} in {args.object_size} objects; "
                                f"mean of {args.repeats} runs", table)])
        log(f"wrote {base}.{{csv,png,md}} in {bed.elapsed():.0f} s")


if __name__ == "__main__":
    main()
