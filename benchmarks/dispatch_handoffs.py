"""What ordering costs the DataNode's CPU: its context switches and CPU time per GiB moved, no vnode-sync
against these shares, on one of edge_scenarios' profiles and one given scenario of bulk users.

    sudo .venv/bin/python -m benchmarks.dispatch_handoffs [--profile paced] [--scenario bulk-reader:8,bulk-reader:4]
        [--rounds 2]

Each round runs the scenario's two cells, none then wc-nocpu (edge_scenarios.run_cell: 5 s warm-up, then
the window), and counts the DataNode JVM's context switches and task clock with `perf stat -p` over
PERF_SECONDS inside the window. Where the dispatcher holds packets, a slot that changes hands parks one
thread and wakes another (docs/edge.md section 1, step 4): the switches per GiB above none's are those
handoffs, and the CPU per GiB above none's what they and the rest of the agent cost.
"""

import argparse
import subprocess
import sys
import threading
import time

from benchmarks import edge_scenarios
from testbed.processes import exit_once_on_signals

WINDOW_SECONDS = 18.0
PERF_SECONDS = 12.0
GiB = 1 << 30


def perf_stat(pid: int, seconds: float) -> tuple[float, float]:
    """(context switches, task-clock seconds) of process PID's threads over SECONDS."""
    out = subprocess.run(["perf", "stat", "-x,", "-e", "context-switches,task-clock", "-p", str(pid), "--",
                          "sleep", str(seconds)], capture_output=True, text=True, check=True).stderr
    values = {fields[2]: float(fields[0]) for fields in (line.split(",") for line in out.splitlines())
              if len(fields) > 2 and fields[0].replace(".", "", 1).isdigit()}
    return values["context-switches"], values["task-clock"] / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="paced", choices=sorted(edge_scenarios.PROFILES))
    parser.add_argument("--scenario", type=edge_scenarios.parse_scenario,
                        default=edge_scenarios.parse_scenario("bulk-reader:8,bulk-reader:4"))
    parser.add_argument("--rounds", type=int, default=2, choices=range(1, 21), metavar="1-20")
    args = parser.parse_args(argv)
    exit_once_on_signals()
    print(f"profile {args.profile}: {edge_scenarios.PROFILES[args.profile].what}; {args.scenario.describe()}; "
          f"perf over {PERF_SECONDS:.0f} s of each {WINDOW_SECONDS:.0f} s window", flush=True)
    with edge_scenarios.testbed(edge_scenarios.PROFILES[args.profile], True) as bed:
        bed.prepare(args.scenario)
        for round_ in range(args.rounds):
            for policy in ("none", "wc-nocpu"):
                counted: dict[str, tuple[float, float]] = {}

                def probe() -> None:
                    time.sleep(edge_scenarios.WARM_UP_SECONDS + (WINDOW_SECONDS - PERF_SECONDS) / 2)
                    counted["perf"] = perf_stat(bed.dn.pid, PERF_SECONDS)
                during = threading.Thread(target=probe)
                during.start()
                cell = edge_scenarios.run_cell(bed, args.scenario, policy, WINDOW_SECONDS)
                during.join()
                switches, cpu = counted["perf"]
                gib = cell.node_bps * PERF_SECONDS / GiB
                rates = " : ".join(f"{r / 1e6:.1f}" for r in cell.rates.values())
                print(f"round {round_} {policy:<8} node {cell.node_bps / 1e6:6.1f} MB/s (users {rates}), "
                      f"context switches {switches / gib:7.0f} /GiB, DataNode CPU {cpu / gib:.2f} s/GiB; "
                      f"{'; '.join(cell.volumes)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
