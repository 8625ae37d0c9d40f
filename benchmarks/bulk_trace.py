"""A `benchmarks.bulk_shares --trace` file as a table: per sample, each DataNode's per-user rates and
scheduler waits, its R, and what the coordinator allocated each user on each node against the demand
it took.

    .venv/bin/python -m benchmarks.bulk_trace FILE [--direction write|read] [--policy wc-weights]

Columns per DataNode: alice's and bob's MB/s (a, b), the seconds their packets waited in the
DataNode's scheduler per second (w; above 1 when several ops waited at once, or a long wait ended
in the sample), their ops so far (o), R (MB/s), the flows backlogged (bl) and the busiest data
disk's busy fraction. Then per user (the last two characters of its name) allocated/demand MB/s
on each node, as `vnodectl status --json` gave them (-1: unbounded or none).
"""

import argparse
import json
import sys

MB = 1_000_000
ROLES = ("alice", "bob")


def rows(lines: list[dict], direction: str) -> list[str]:
    out = []
    for before, now in zip(lines, lines[1:]):
        seconds = now["t"] - before["t"]
        if seconds <= 0:
            continue
        cells = [f"{now['t']:5.1f}"]
        for dn in sorted(now["dn"]):
            this, last = now["dn"][dn], before["dn"].get(dn)
            if not isinstance(this, dict) or not isinstance(last, dict):
                cells.append(f"{dn}: ?")
                continue
            parts = []
            for role in ROLES:
                u, v = this["users"].get(role, {}), last["users"].get(role, {})
                rate = (u.get(f"{direction}_bytes", 0) - v.get(f"{direction}_bytes", 0)) / seconds / MB
                waited = (u.get(f"{direction}_wait_ns", 0) - v.get(f"{direction}_wait_ns", 0)) / seconds / 1e9
                parts.append(f"{role[0]} {rate:5.1f} w{waited:4.2f} o{u.get(f'{direction}_ops', 0)}")
            node = this["node"]
            rate, backlogged = node.get(f"{direction}_rate_bps", 0) / MB, node.get(f"{direction}_backlogged", 0)
            parts.append(f"R {rate:4.1f} bl{backlogged:.0f} disk {node.get('disk_busy', 0):.2f}")
            cells.append(f"{dn}: " + " ".join(parts))
        given = now.get("given")   # absent with the coordinator stopped; an error's text if it did not answer
        for user, nodes in given.items() if isinstance(given, dict) else ():
            if nodes:
                cells.append(user[-2:] + " " + ",".join(f"{n[f'allocated_{direction}_bps'] / MB:.1f}/"
                                                        f"{_mbs(n[f'demand_{direction}_bps']):.1f}" for n in nodes))
        out.append(" | ".join(cells))
    return out


def _mbs(value: float | None) -> float:
    return -1.0 if value is None else value / MB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--direction", choices=("write", "read"), default="write")
    parser.add_argument("--policy", default=None, help="only this policy's samples (default: each in turn)")
    args = parser.parse_args(argv)
    try:
        with open(args.file) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"bulk_trace: {args.file}: {e}", file=sys.stderr)
        return 2
    policies = [args.policy] if args.policy else list(dict.fromkeys(line["policy"] for line in lines))
    for policy in policies:
        print(f"## {policy}")
        print("\n".join(rows([line for line in lines if line["policy"] == policy], args.direction)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
