"""The storage agent's looks between reports, by the node's VNodes: CPU per look against the regular
report in the same run, on the host's real blkio-v1 hierarchy.

    sudo .venv/bin/python -m benchmarks.probe_cost [--vnodes 100 1000 5000] [--looks 40]

Between its reports the agent looks at its demand every `probe_seconds` (0.25 s by default) and
reports at once when a user's demand moved sharply (agents/storage/report_interval.py). A look is
`Reconciler.usage_report(node, only_if_sharp=True)`: every VNode's counters read from its cgroup, the
demand estimated, the summary compared; in a steady state nothing moved and nothing is sent. Per
node size (--vnodes VNodes under a unique prefix, each with a read limit on one loop device and a
few KiB read through it, so its counters hold a device's lines as a busy node's do):
  - CPU per look, and of it the kernel's part (`backend.usage()`: listing and reading the cgroups);
  - CPU per regular report (`usage_report(node)`), the baseline;
  - what looking every 0.25 s, 0.5 s and 1 s would cost of one core, and the period the agent takes
    (report_interval.next_look_in: looks at most PROBE_CPU_SHARE of a core) with what it costs.
The cgroups and the loop device are removed on the way out, also on an error.
"""

import argparse
import contextlib
import mmap
import os
import sys
import threading

from benchmarks.policy_instances import machine
from benchmarks.scenario_runner import cpu
from testbed.loopdev import loop_device
from testbed.names import unique_name
from vnode_sync.agents.config import PROBE_SECONDS
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.agents.storage.report_interval import next_look_in
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.wire import vnode_pb2 as pb

PROBE_PERIODS = (0.25, 0.5, 1.0)
FIRST_UID = 200_000


class NoHandlers:
    """The looks read counters only; no file-system threads to place."""

    name, shared_process = "none", False

    def scan(self, users):
        return []


def desired(users: int, device: str) -> pb.DesiredState:
    names = [f"p{i:05d}" for i in range(users)]
    return pb.DesiredState(
        generation=1, node_id="probe",
        vnodes=[pb.VNodeSpec(user=n, uid=FIRST_UID + i, priority=1,
                             shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=50_000_000))]) for i, n in enumerate(names)],
        default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=device, read=pb.Share(ceiling_bps=1_000_000))]),
        users=[pb.User(name=n, uid=FIRST_UID + i) for i, n in enumerate(names)])


def read_in_each(backend: BlkioV1Backend, device: str) -> None:
    """A few KiB read from the device by this thread in every VNode, so each has counters for it."""
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    buffer = mmap.mmap(-1, 4096)        # page-aligned, as O_DIRECT wants
    tid = threading.get_native_id()
    try:
        for i, vnode in enumerate(sorted(backend.vnodes())):
            backend.place(vnode, tid)
            os.preadv(fd, [buffer], (i % 1000) * 4096)
    finally:
        backend.release(tid)
        os.close(fd)
        buffer.close()


def cpu_per_call(call, times: int) -> float:
    _, spent = cpu(lambda: [call() for _ in range(times)])
    return spent / times


def measure(vnodes: int, looks: int, device: str) -> tuple[float, float, float, int]:
    """(CPU per look, of it the kernel's reading, CPU per regular report, VNodes whose counters show
    the device) at this many VNodes."""
    backend = BlkioV1Backend(HostCgroups().blkio_v1, unique_name("probe"))
    reconciler = Reconciler(backend, NoHandlers(), {})
    try:
        backend.setup()
        reconciler.apply(desired(vnodes, device))
        if reconciler.errors:
            raise RuntimeError(f"applying {vnodes} VNodes: {reconciler.errors[0]}")
        read_in_each(backend, device)
        counted = sum(1 for usage in backend.usage().values() if any(c.read_bytes for c in usage.devices.values()))
        reconciler.usage_report("probe")            # the first, full report: the estimates start
        report = cpu_per_call(lambda: reconciler.usage_report("probe"), max(3, looks // 8))
        look = cpu_per_call(lambda: reconciler.usage_report("probe", only_if_sharp=True), looks)
        reading = cpu_per_call(backend.usage, looks)
        return look, reading, report, counted
    finally:
        with contextlib.suppress(Exception):
            backend.release(threading.get_native_id())
        backend.teardown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vnodes", type=int, nargs="*", default=[100, 1000, 5000])
    parser.add_argument("--looks", type=int, default=40)
    args = parser.parse_args()
    if os.geteuid() != 0 or not HostCgroups().has_blkio_v1():
        print("probe_cost: needs root and the host's cgroup v1 blkio hierarchy", file=sys.stderr)
        return 2
    print(f"# {machine()}")
    print(f"$ python -m benchmarks.probe_cost --vnodes {' '.join(map(str, args.vnodes))} --looks {args.looks}")
    print(f"{'VNodes':>7} {'counted':>7} {'look ms':>8} {'reading ms':>10} {'report ms':>9} {'look/report':>11} "
          + " ".join(f"{f'core at {p:g} s':>13}" for p in PROBE_PERIODS) + f" {'agent looks every':>17} {'core':>6}",
          flush=True)
    with loop_device(unique_name("probe-disk"), size_mb=64) as (device, _):
        for vnodes in args.vnodes:
            look, reading, report, counted = measure(vnodes, args.looks, device)
            period = next_look_in(PROBE_SECONDS, look)
            print(f"{vnodes:>7} {counted:>7} {look * 1e3:>8.2f} {reading * 1e3:>10.2f} {report * 1e3:>9.2f} "
                  f"{look / report:>11.2f} " + " ".join(f"{look / p:>12.1%} " for p in PROBE_PERIODS)
                  + f" {period:>15.2f} s {look / period:>6.1%}", flush=True)
    print("counted: VNodes whose counters show the device (with the default VNode); look: "
          "usage_report(only_if_sharp=True) with nothing moved (the steady state: nothing sent); reading: "
          "backend.usage() alone; report: the regular usage_report; 'core at P s': one core's share spent on "
          "looks every P s; 'agent looks every': the period the agent takes with probe_seconds 0.25 (its default)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
