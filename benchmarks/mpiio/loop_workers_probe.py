"""Why VNodes read faster than no VNode on the emulated disk (fig. 2): the loop driver runs
one worker per blkio cgroup, and each worker sends its requests to the backing file one at
a time. Two readers in one cgroup share a worker; in two cgroups they get one each.

    sudo .venv/bin/python -m benchmarks.mpiio.loop_workers_probe

Two `dd` readers (16 KiB or 1 MiB, O_DIRECT) of separate files, first both in the bench root
cgroup, then each in a VNode of its own with no limits. Writes results/loop-workers.md.
"""

import os
import subprocess

from benchmarks.mpiio import report
from benchmarks.mpiio.bench_vnodes import VNodeSpec
from benchmarks.mpiio.experiment import command_line, common_options, log, testbed

BLOCKS = {"16K": 4096, "1M": 64}


def two_readers(bed, block: str, vnodes: list[str]) -> float:
    """Aggregate MB/s of two concurrent dd readers, each placed in `vnodes[i]` (or the bench root)."""
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
    procs = []
    for i in range(2):
        target = os.path.join(bed.vnodes.backend.root, vnodes[i] if vnodes else "", "tasks")
        script = (f'echo $$ > {target}; exec dd if={bed.disk.mountpoint}/probe.{i} of=/dev/null '
                  f'bs={block} count={BLOCKS[block]} iflag=direct')
        procs.append(subprocess.Popen(["sh", "-c", script], stderr=subprocess.PIPE, text=True))
    total = 0.0
    for p in procs:
        line = next(l for l in p.communicate()[1].splitlines() if "copied" in l)
        nbytes = int(line.split()[0])
        seconds = float(line.split(" copied, ")[1].split(" s")[0])
        total += nbytes / seconds / 1e6
    return total


def main() -> None:
    args = common_options(__doc__).parse_args()
    out = args.out
    with testbed(args, "loopprobe") as bed:
        for i in range(2):
            subprocess.run(["dd", "if=/dev/zero", f"of={bed.disk.mountpoint}/probe.{i}", "bs=1M", "count=64",
                            "oflag=direct"], check=True, capture_output=True)
        rows = []
        for block in BLOCKS:
            for layout in ("one cgroup", "two VNodes"):
                names = []
                if layout == "two VNodes":
                    names = bed.vnodes.configure(bed.disk.device_number, [VNodeSpec("vnode.a"), VNodeSpec("vnode.b")])
                else:
                    bed.vnodes.configure(bed.disk.device_number, [])
                mbps = [two_readers(bed, block, names) for _ in range(3)]
                rows.append((block, layout, *mbps))
                log(f"{block} {layout}: {mbps}")
        table = report.markdown_table(("request", "readers in", "run 1 MB/s", "run 2", "run 3"), rows)
        report.write_markdown(os.path.join(out, "loop-workers.md"), "Loop workers: one cgroup vs two VNodes",
                              bed.record, command_line(), bed.elapsed(),
                              [("Two concurrent O_DIRECT readers, aggregate", table)])


if __name__ == "__main__":
    main()
