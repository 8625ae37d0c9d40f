"""Control cost at site size: the coordinator's whole work-conserving tick (coordinator.weight_control),
not only the weight step: gathering the demand book, the step, the hysteresis and every changed
node's message.

    .venv/bin/python -m benchmarks.weight_control_tick [--sites 10000x12x1000:node 1000x12x200:device]

A site is NODESxDISKSxUSERS and how its edges share: `node` (the DataNode's scheduler: one resource
per node and direction, of all its disks) or `device` (BFQ: one per disk and direction). Every user
demands on ~30% of the nodes, all of each node's disks, 0.2-3x an equal share of each: most nodes
are oversubscribed. Per site, the CPU of three ticks: the first
(every node is sent), one with nothing changed (none is), and one after half the users went idle on
half the nodes; the seconds spent writing messages, the nodes sent and a message's size.

Baseline, in the same run: the per-pair message of dd46e60 (a share per user and device, each node's
columns found by a scan over every resource), built for a sample of nodes and scaled to the nodes
sent. The agent's side is timed too: reading one node's weights back (agents.storage.allocation).
CPU is the process's (time.process_time), all its threads together: the step works its blocks of
resources on every core (policy.column_shards), so a tick ends sooner than its CPU here.
"""

import argparse
import itertools
import sys

import numpy as np

from benchmarks.scenario_runner import cpu
from vnode_sync.agents.storage.allocation import allocated_weights
from vnode_sync.coordinator.config import parse_config
from vnode_sync.coordinator.control.node_edge import Edge
from vnode_sync.coordinator.state.store import UserRecord
from vnode_sync.coordinator.state.usage_ledger import UsageLedger
from vnode_sync.coordinator.control.weight_control import WeightControl
from vnode_sync.wire import vnode_pb2 as pb

MB = 1e6
BASELINE_SAMPLE = 20

def site(nodes: int, disks: int, users: int, per_node: bool, seed: int):
    config = parse_config({"policy": {"sharing": "work-conserving"}, "storage_nodes": [
        {"id": f"dn{i:05d}", "devices": [{"name": f"/dev/sd{chr(98 + d)}", "read_bps": int(200 * MB),
                                          "write_bps": int(150 * MB)} for d in range(disks)]}
        for i in range(nodes)]})
    control = WeightControl(config, UsageLedger(), itertools.count(1).__next__)
    for node in config.storage_nodes:
        control.register(node.node_id, Edge(by_weight=True, per_node=per_node))
    rng = np.random.default_rng(seed)
    records = [UserRecord(f"user{u:04d}", 5000 + u, int(rng.integers(1, 11)), True, 0, None, False, 0, 0)
               for u in range(users)]
    # The demand book as the ledger's listener writes it from the agents' summaries: a DataNode
    # reports on its first disk, a BFQ host on each.
    rows = np.array([control._row(r.name) for r in records])
    on = rng.random((users, nodes)) < 0.3
    columns = control._book_columns
    per_disk = np.where(per_node, device_index(columns) == 0, True)
    # Each user on a node wants 0.2-3x an equal share of it there: most nodes are oversubscribed.
    share = columns.capacity * (disks if per_node else 1) / (0.3 * users)
    wanted = np.where(on[:, columns.node] & per_disk, rng.uniform(0.2, 3.0, (users, len(columns))) * share, 0.0)
    control._demand[rows] = wanted.astype(np.float32)
    control._held[rows] = wanted > 0
    resum(control)
    return control, records, rows, columns

def resum(control: WeightControl) -> None:
    """The per-node book after the demand book was written directly."""
    for i in range(len(control._book_columns.node_ids)):
        control._sum_node(i, slice(None))

def device_index(columns) -> np.ndarray:
    """Each book column's device, as its index among its node's devices."""
    return (np.arange(len(columns)) - columns.start[columns.node]) // 2

def timed_messages(control: WeightControl) -> list[float]:
    """Wraps the control's message writer to add up its CPU."""
    spent = [0.0]
    write = control._message

    def counted(*args):
        out, took = cpu(lambda: write(*args))
        spent[0] += took
        return out

    control._message = counted
    return spent

def per_pair_message(node_id: str, names: list[str], resources: list[tuple[str, str, int]], weights: np.ndarray,
                     sequence: int) -> bytes:
    """dd46e60's form: the node's columns found by a scan, a share message per user and device."""
    columns = [(j, r) for j, r in enumerate(resources) if r[0] == node_id]
    per_user = []
    for i, name in enumerate(names):
        shares: dict[str, dict[str, pb.Share]] = {}
        for j, (_, device, direction) in columns:
            shares.setdefault(device, {})[("read", "write")[direction]] = pb.Share(weight=float(weights[i, j]))
        per_user.append(pb.VNodeSpec(user=name, shares=[pb.ResourceShare(device=device, **fields)
                                                        for device, fields in sorted(shares.items())]))
    return pb.DesiredState(generation=sequence, vnodes=per_user).SerializeToString()

def baseline_per_node(control: WeightControl, names: list[str], sample: list[str]) -> tuple[float, int]:
    """CPU and bytes of the per-pair message per node, over SAMPLE, with the last step's weights spread
    over every (node, disk, direction) as dd46e60 kept them."""
    columns = control._book_columns
    device = device_index(columns)
    resources = [(columns.node_ids[columns.node[j]], columns.devices[columns.node[j]][device[j]],
                  int(columns.direction[j])) for j in range(len(columns))]
    layout = control._layout
    spread = np.zeros((len(names), len(columns)), dtype=np.float32)
    index = {node: columns.node_index[node] for node in sample}
    for node in sample:
        first, last = layout.block[index[node]]
        start = int(columns.start[index[node]])
        width = 2 * len(columns.devices[index[node]])
        block = control._sent[:, first:last]
        spread[:, start:start + width] = np.tile(block, width // block.shape[1])
    size, spent = cpu(lambda: sum(len(per_pair_message(node, names, resources, spread, 1)) for node in sample))
    return spent / len(sample), size // len(sample)

def run(nodes: int, disks: int, users: int, per_node: bool, seed: int) -> dict:
    (control, records, rows, columns), setup = cpu(lambda: site(nodes, disks, users, per_node, seed))
    spent = timed_messages(control)
    first, first_cpu = cpu(lambda: control.tick(records))
    first_messages = spent[0]
    steady, steady_cpu = cpu(lambda: control.tick(records))
    rng = np.random.default_rng(seed + 1)
    idle_users = rows[rng.permutation(users)[: users // 2]]
    idle_nodes = rng.permutation(nodes)[: nodes // 2]
    gone = np.isin(columns.node, idle_nodes)
    control._demand[np.ix_(idle_users, np.flatnonzero(gone))] = 0.0
    control._held[np.ix_(idle_users, np.flatnonzero(gone))] = False
    resum(control)
    spent[0] = 0.0
    change, change_cpu = cpu(lambda: control.tick(records))
    names = [r.name for r in records]
    sample = sorted(change or first)[:BASELINE_SAMPLE]
    message = control.node_allocation(sample[0])[1]
    old_per_node, old_size = baseline_per_node(control, names, sample)
    _, decode = cpu(lambda: allocated_weights(pb.DesiredState.FromString(message).allocation.shares))
    return {"setup": setup, "first": (len(first), first_cpu, first_messages), "steady": (len(steady), steady_cpu),
            "change": (len(change), change_cpu, spent[0]), "size": len(message), "old_per_node": old_per_node,
            "old_size": old_size, "decode": decode, "iterations": control.last_step.iterations}

def parse_site(text: str) -> tuple[int, int, int, bool]:
    shape, _, sharing = text.partition(":")
    nodes, disks, users = (int(x) for x in shape.split("x"))
    if sharing not in ("node", "device"):
        raise argparse.ArgumentTypeError(f"{text!r}: NODESxDISKSxUSERS:node or :device")
    return nodes, disks, users, sharing == "node"

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sites", nargs="+", type=parse_site,
                        default=[parse_site(s) for s in ("10000x12x1000:node", "2000x12x500:node",
                                                         "1000x12x200:device", "500x12x500:device")])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{'site (nodes x disks x users)':>30} {'resources':>9} {'tick s: first':>13} {'steady':>7} "
          f"{'change':>7} {'of it msgs':>10} {'sent':>6} {'msg KB':>7} {'per-pair s/node':>15} "
          f"{'per-pair s at sent':>18} {'ratio':>6} {'agent read ms':>13}")
    for nodes, disks, users, per_node in args.sites:
        row = run(nodes, disks, users, per_node, args.seed)
        sent, change_cpu, change_messages = row["change"]
        resources = nodes * 2 * (1 if per_node else disks)
        old_at_sent = row["old_per_node"] * sent
        label = f"{nodes}x{disks}x{users}:{'node' if per_node else 'device'}"
        print(f"{label:>30} {resources:>9} {row['first'][1]:>13.2f} {row['steady'][1]:>7.2f} {change_cpu:>7.2f} "
              f"{change_messages:>10.2f} {sent:>6} {row['size'] / 1e3:>7.1f} {row['old_per_node']:>15.4f} "
              f"{old_at_sent:>18.1f} {old_at_sent / max(change_messages, 1e-9):>6.0f} "
              f"{row['decode'] * 1e3:>13.1f}", flush=True)
        print(f"{'':>30} first tick sent {row['first'][0]} nodes ({row['first'][2]:.2f} s of messages); "
              f"steady sent {row['steady'][0]}; per-pair message {row['old_size'] / 1e3:.1f} KB; "
              f"step iterations {row['iterations']}; set-up {row['setup']:.1f} s", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
