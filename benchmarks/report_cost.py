"""Coordinator CPU per usage report, by the node's users: demand summaries against full reports.

    .venv/bin/python -m benchmarks.report_cost [--users 100 1000 10000] [--changed 10]

The usage ledger (coordinator/state/usage_ledger.py) books each report. Per node size, CPU per report of:
  - a full summary (every entry, as an agent sends every FULL_SECONDS and after a reconnect): the
    baseline, measured in the same run;
  - a demand summary listing only `--changed` moved entries (the agent's steady state), booked for
    the weight step (every node kind, cap-only ones too).
Target: a summary's cost does not grow with the node's unchanged users (ratio to the smallest node ~1).
"""

import argparse
import sys

from benchmarks.policy_instances import machine
from benchmarks.scenario_runner import cpu
from vnode_sync.agents.storage.demand_summary import Entry, packed
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.wire import vnode_pb2 as pb

MB = 1_000_000
DEVICES = ("/dev/sdb", "/dev/sdc")
REPORTS = 200


def summary_report(users: list[str], at: float, changed: int, full: bool) -> pb.UsageReport:
    chosen = users if full else [users[(int(at) * 7 + i) % len(users)] for i in range(changed)]
    entries = {(u, d): Entry(10 * MB + at, 0.0, True, False, 40 * MB, 0.0) for u in chosen for d in DEVICES}
    return pb.UsageReport(node_id="dn0", sampled_at_unix=at, demand=packed(entries, full, []))


def per_report(ledger: UsageLedger, reports: list[pb.UsageReport], known: set[str]) -> float:
    _, spent = cpu(lambda: [ledger.observe(report, known) for report in reports])
    return spent / len(reports)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="*", default=[100, 1000, 10000])
    parser.add_argument("--changed", type=int, default=10)
    args = parser.parse_args()
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.report_cost --users {' '.join(map(str, args.users))} --changed {args.changed}")
    print(f"{'users':>7} {'full report us':>15} {'summary us':>11} {'summary/full':>12} {'vs smallest':>11}")
    first = None
    for n in args.users:
        users = [f"u{i}" for i in range(n)]
        known = set(users)
        rounds = max(5, REPORTS * 100 // n)
        full = per_report(UsageLedger(), [summary_report(users, 1000.0 + i, 0, True) for i in range(rounds)], known)
        ledger = UsageLedger()
        ledger.observe(summary_report(users, 999.0, args.changed, True), known)
        summaries = [summary_report(users, 1000.0 + i, args.changed, False) for i in range(REPORTS)]
        summary = per_report(ledger, summaries, known)
        first = first or summary
        print(f"{n:>7} {1e6 * full:>15.0f} {1e6 * summary:>11.1f} {summary / full:>12.4f} {summary / first:>11.2f}",
              flush=True)
    print(f"({args.changed} users moved per summary, {len(DEVICES)} devices each; CPU per report booked in the ledger)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
