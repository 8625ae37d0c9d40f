"""benchmarks.interactive_shares' ratios re-read from its output, each with its bootstrap interval.

Every transfer time is printed on the per-pass lines, so a committed results file can be read again
for what a run could and could not tell (benchmarks/bootstrap.py). A file may hold several runs: each
begins at its "load average at start" line and is titled by the "# " line before it, if any.

    .venv/bin/python -m benchmarks.interactive_intervals benchmarks/results/edge/FILE.txt [--baseline static]
        [--max-steal-seconds 10]

--max-steal-seconds leaves out each per-pass cell whose machine lost more CPU than that to the
hypervisor (the "machine: steal N ms" the line ends with): on a shared VM such a cell measures the
host, not the policy. The cells left out are named.
"""

import argparse
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from benchmarks.bootstrap import CONFIDENCE, DRAWS, describe_ratios

CELL = re.compile(r"^  (?P<policy>[a-z][\w-]*)(?: pass \d+)? (?P<phase>alone|beside bob) (?P<size>\d+) MiB: "
                  r".*?\ball (?P<times>\d+(?: \d+)*)")
STEAL = re.compile(r"\bmachine: steal (?P<ms>\d+) ms")
RUN_START = "load average at start"


@dataclass
class Run:
    title: str
    cells: dict[tuple[str, str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    left_out: list[str] = field(default_factory=list)   # the cells over the steal limit, as their lines begin


def parse_runs(lines: list[str], max_steal_ms: float | None = None) -> list[Run]:
    """Each run's transfer times (s) by (policy, phase, MiB), its passes pooled; with `max_steal_ms`,
    without the cells whose line says the machine lost more CPU than that to steal."""
    runs: list[Run] = []
    title = ""
    for line in lines:
        if line.startswith("# "):
            title = line[2:].strip()
        elif line.startswith(RUN_START):
            runs.append(Run(title))
            title = ""
        elif runs and (cell := CELL.match(line)):
            steal = STEAL.search(line)
            if max_steal_ms is not None and steal and int(steal["ms"]) > max_steal_ms:
                runs[-1].left_out.append(f"{line.split(':', 1)[0].strip()} (steal {int(steal['ms']) / 1000:.1f} s)")
                continue
            key = (cell["policy"], cell["phase"], int(cell["size"]))
            runs[-1].cells[key].extend(int(ms) / 1000 for ms in cell["times"].split())
    return [run for run in runs if run.cells or run.left_out]


def describe(run: Run, baseline: str) -> list[str]:
    if not any(policy == baseline for policy, _, _ in run.cells):
        return [f"  no {baseline} transfers in this run"]
    lines = []
    for (policy, phase, size), times in sorted(run.cells.items(), key=lambda item: (item[0][1], item[0][2], item[0][0])):
        base = run.cells.get((baseline, phase, size))
        if policy == baseline or not base:
            continue
        lines.append(f"  {phase:<10} {size:>3} MiB {policy:<13} n={len(times):<4} "
                     + describe_ratios(times, base))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--baseline", default="static", help="the policy the others are divided by")
    parser.add_argument("--max-steal-seconds", type=float, default=None,
                        help="leave out the cells whose machine lost more CPU than this to steal")
    args = parser.parse_args(argv)
    max_steal_ms = None if args.max_steal_seconds is None else args.max_steal_seconds * 1000
    try:
        with open(args.file, encoding="utf-8", errors="replace") as f:
            runs = parse_runs(f.read().splitlines(), max_steal_ms)
    except OSError as err:
        print(f"interactive_intervals: {args.file}: {err.strerror}", file=sys.stderr)
        return 2
    if not runs:
        print(f"interactive_intervals: {args.file}: no interactive_shares transfers in it", file=sys.stderr)
        return 2
    print(f"ratios against {args.baseline}, each with its {CONFIDENCE:.0%} interval over {DRAWS:,} redraws "
          "of both sides' transfers (times as printed, to the ms)")
    for number, run in enumerate(runs, 1):
        print(f"\nrun {number}: {run.title or '(untitled)'}")
        print("\n".join(describe(run, args.baseline)))
        if run.left_out:
            print(f"  left out, over {args.max_steal_seconds:g} s of steal: " + "; ".join(run.left_out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
