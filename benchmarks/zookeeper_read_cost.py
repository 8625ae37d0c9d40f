"""What a state read costs on the ZooKeeper store now that it syncs first, against the bare read it
was before, in the same run.

    .venv/bin/python -m benchmarks.zookeeper_read_cost [--users 100] [--calls 2000]

A real three-server ensemble on loopback (Debian's ZooKeeper). The store holds --users users. Timed,
one call after another from one client:
- `get`: a bare read of the generation znode: what `ZooKeeperStore._current` cost before it synced
  (the state itself is cached until the generation moves);
- `store.user(name)`: the store's read as the coordinator's admin calls make it (a sync, then that read);
- `store.users()`: the same for the whole list (the publisher's read on each change).
Printed: p50 and p99 per call, and each against `get`.
"""

import argparse
import sys
import time
import uuid
from typing import Callable

from kazoo.client import KazooClient

from benchmarks.percentile import percentile
from testbed.names import unique_name
from testbed.zookeeper_ensemble import WHY_NO_ZOOKEEPER, ZooKeeperEnsemble
from vnode_sync.coordinator.state.zookeeper_store import ZooKeeperStore


def timed(call: Callable[[], object], calls: int) -> list[float]:
    """Seconds each of CALLS calls took."""
    out = []
    for _ in range(calls):
        began = time.perf_counter()
        call()
        out.append(time.perf_counter() - began)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    if WHY_NO_ZOOKEEPER is not None:
        print(f"zookeeper_read_cost: {WHY_NO_ZOOKEEPER}", file=sys.stderr)
        return 2
    with ZooKeeperEnsemble(unique_name("zkread")) as ensemble:
        client = KazooClient(hosts=ensemble.hosts, timeout=10)
        client.start(timeout=20)
        try:
            root = f"/vnode-sync-bench/{uuid.uuid4().hex}"
            store = ZooKeeperStore(client, root)
            for i in range(args.users):
                store.add_user(f"u{i}", 20_000 + i, 1 + i % 100, True)
            generation = f"{root}/generation"
            reads = {
                "get (the read before the sync)": lambda: client.get(generation),
                "store.user(name)": lambda: store.user("u0"),
                f"store.users() ({args.users} users)": store.users,
            }
            for call in reads.values():
                timed(call, 100)   # warm: connections, the cached state
            results = {name: timed(call, args.calls) for name, call in reads.items()}
            client.delete(root, recursive=True)
            store.close()
        finally:
            client.stop()
            client.close()
    base = results["get (the read before the sync)"]
    print(f"ZooKeeper 3-server ensemble on loopback, {args.users} users, {args.calls} calls each, one client")
    print(f"{'read':<34} | p50 ms | p99 ms | p50 / get | p99 / get")
    for name, seconds in results.items():
        p50, p99 = percentile(seconds, 50), percentile(seconds, 99)
        print(f"{name:<34} | {p50 * 1e3:6.3f} | {p99 * 1e3:6.3f} | {p50 / percentile(base, 50):9.2f} | "
              f"{p99 / percentile(base, 99):9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
