"""Interactive users under work conservation: small transfers with idle gaps beside a user that
never pauses, under static caps, the rate re-setting loop, and per-request weights, in one run.

    sudo .venv/bin/python -m benchmarks.interactive_shares [--backend datanode-throttle|blkio-v1]
        [--direction read|write] [--rounds 20] [--sizes 1,4,16] [--gap 1.5] [--disk-mbps 60] [--bfq k=v,...]
        [--hdfs-site k=v,...] [--queue k=v,...] [--client-cpu shared|alice-first|bob-last] [--passes 1]

A real HDFS (NameNode and one DataNode) on a paced disk of --disk-mbps (reads; writes too with
--direction write), the coordinator configured with that bandwidth, one storage agent; alice
(priority 8) moves files of --sizes MiB one after another with --gap s idle between them, through
Hadoop's own client library in one JVM (testbed/hdfs_cluster/VnodeSyncHdfsStream.java `reads` /
`writes`: each transfer's time is the client's, from open to the last byte); bob (priority 4)
reads (writes) without pause. Every read is the disk's: alice reads each file once (written and
dropped from the page cache beforehand), and bob's file is kept out of the page cache while he
re-reads it (testbed.share_watch.CacheDropper). Writes retry a completeFile the NameNode turned down
after 2 ms, doubling, not Hadoop's 400 (WRITE_SITE; --hdfs-site overrides it), and the table counts
the writes it turned down. Every process runs in one cpu group (testbed.cpu_priority); --client-cpu
puts alice's client, or bob's, in a group of its own inside it. Policies, each on a fresh coordinator
and agent over the same HDFS:

- static: Algorithm 1's caps (alice 2/3 of the disk, bob 1/3);
- wc-rates: allocation work-conserving with the rate re-setting loop (what main did: the
  DataNode's Java agent with `sharing: rates`; for blkio-v1, the loop device's scheduler `none`,
  so the agent sets throttles from the allocation);
- wc-weights: allocation work-conserving with per-request weights (the Java agent's scheduler;
  for blkio-v1, BFQ on the loop device, DiskModel.spindle, and BFQ weights);
- static-again (only when named): static caps once more, after the others: the baseline against
  itself, so the table shows how far two series of one policy differ in this run.

For each policy alice runs --rounds transfers of each size alone, then as many beside bob.
--passes N runs the policies N times over, each pass in the reverse order of the one before
(static, weights, weights, static for two), and pools each policy's transfers: the host's drift
within a sitting, measured as large as the target's margin (static caps' own 1 MiB p50 went from
31 to 50 ms in an hour), then weighs on every policy alike instead of on whichever ran last. The
table prints each policy's p50 and p99 against static's in the same run (the issue's target:
with bob, at most 1.2x static's at p50 and p99; alone, no slower than static), and what the disk
delivered with bob alone: static caps give alice 2/3 of the configured bandwidth whatever the node
delivers (bob gets the rest), a weight 2/3 of what it delivers, so on a node that delivers less than
configured static's times are not alice's weighted share (alice's times beside bob under weights
are ~1/(delivered/configured) of static's at best).
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator

from benchmarks import machine_sample
from benchmarks.bootstrap import CONFIDENCE, DRAWS, describe_ratios, p50, p99
from benchmarks.disk_warm_up import HEADER_NOTE as WARM_UP_NOTE, add_warm_up_option, warm_up_disks
from benchmarks.policy_names import policy_list
from benchmarks.scenario_runner import in_passes
from benchmarks.write_timeline import closes_turned_down, log_lines
from testbed.cpu_priority import MAX_SHARES, MIN_SHARES, cpu_child, cpu_priority, stay
from testbed.hdfs_cluster import HdfsCluster, datanode_throttle_jar
from testbed.hdfs_cluster.daemons import Transfer
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from testbed.loopdev import check_ext4_options, ext4_mount_options, queue_settings
from testbed.names import unique_name
from testbed.process_cpu import CpuSpan, cluster_roles
from testbed.processes import exit_once_on_signals
from testbed.share_watch import CacheDropper, block_files
from vnode_sync.datanode.channel import ThrottleChannel
from vnode_sync.errors import InvalidArgument
from vnode_sync.kernel import disk_queue
from vnode_sync.kernel.disk_queue import QueueSetting

MB = 1_000_000
MiB = 1 << 20
POLICIES = ("static", "wc-rates", "wc-weights", "static-again")
STATIC_CAPS = ("static", "static-again")
ALICE, BOB = LocalUser("alice", 64_731, 8), LocalUser("bob", 64_732, 4)
# Agents report every 0.25 s and the allocation loop ticks every 0.5 s (defaults 1 s and 1 s): what the
# rate re-setting loop needs to be at its best.
REPORT_SECONDS, CONTROL_SECONDS = 0.25, 0.5
BOB_FILE_MB = 1024
BOB_WRITE_FILES = 4
PHASES = ("alone", "beside bob")
# --client-cpu: the users whose client runs in a cpu group of its own inside the benchmark's, with its cpu.shares.
CLIENT_CPU = {"shared": {}, "alice-first": {ALICE.name: MAX_SHARES}, "bob-last": {BOB.name: MIN_SHARES}}
# Writes' default hdfs-site. A client's completeFile is turned down when the DataNode's report of the
# block has not reached the NameNode yet: about half of all writes here, under every policy. Hadoop
# retries after 400 ms, doubling; that would add 400 ms to half the transfers alike and hide what the
# edge does. At 20 ms the retries still split small writes into two modes 20 ms apart, and a cell's
# p50 then went by how many of its writes drew one. From 2 ms they cost what the report's lag
# costs, give or take 2x; 10 retries still wait 2 s in all, as Hadoop's 5 from 400 ms wait 12 s.
WRITE_SITE = {"dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "2",
              "dfs.client.block.write.locateFollowingBlock.retries": "10"}


@contextlib.contextmanager
def governed(hdfs: HdfsCluster, name: str, policy: str, backend: str, bw: int,
             bfq_tunables: dict[str, str]) -> Iterator[LocalCluster]:
    dn = hdfs.datanodes[0]
    settings = {}
    if backend == "datanode-throttle":
        settings = {"backend": backend, "datanode_throttle": {"socket": hdfs.throttle_socket(dn),
                                                              "sharing": "rates" if policy == "wc-rates" else "weights"}}
    else:
        tunables = [QueueSetting(f"iosched/{k}", v) for k, v in bfq_tunables.items()] if policy == "wc-weights" else []
        disk_queue.apply(dn.loop_device, [QueueSetting("scheduler", "bfq" if policy == "wc-weights" else "none"),
                                          *tunables])
    node = LocalNode(dn.id, (dn.loop_device,), bw, bw, {"kind": "hdfs", "pid": dn.pid}, settings)
    policy_settings = {"sharing": "static" if policy in STATIC_CAPS else "work-conserving",
                       "control_seconds": CONTROL_SECONDS}
    with LocalCluster(f"{name}-{policy}", [ALICE, BOB], [node], agent_settings={"report_seconds": REPORT_SECONDS},
                      coordinator_settings={"policy": policy_settings}) as cluster:
        time.sleep(2)   # the first state and allocation in force
        yield cluster


def ext4_option_list(text: str) -> tuple[str, ...]:
    """--ext4-options: "nodelalloc,commit=30" -> ("nodelalloc", "commit=30")."""
    options = tuple(option for option in text.split(",") if option)
    try:
        check_ext4_options(options)
    except InvalidArgument as bad:
        raise argparse.ArgumentTypeError(str(bad)) from None
    return options


def add_ext4_options_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ext4-options", type=ext4_option_list, default=(),
                        help="mount options of the DataNode's ext4 besides noatime, e.g. nodelalloc")


def key_values(text: str) -> dict[str, str]:
    """'k=v,k2=v2' from the command line."""
    return dict(item.split("=", 1) for item in text.split(",") if item)


def alice_files(policy: str, phase: str, size_mb: int, count: int, pass_number: int = 0) -> list[str]:
    """Her files for one series: each read once, so each read is the disk's."""
    tag = f"{policy}-{phase.replace(' ', '-')}-{size_mb}" + (f"-pass{pass_number}" if pass_number else "")
    return [f"/alice/{tag}-{i}.bin" for i in range(count)]


def write_files(hdfs: HdfsCluster, args) -> set[str]:
    """alice's files (reads) and bob's; returns bob's block files."""
    if args.direction == "read":
        for pass_number, policy in in_passes(args.policies, args.passes):
            for phase in PHASES:
                for size in args.sizes:
                    for path in alice_files(policy, phase, size, args.rounds + 1, pass_number):
                        hdfs.write_file(path, size * MiB, as_uid=ALICE.uid, hdfs_user=ALICE.name)
    before = block_files(hdfs)
    hdfs.write_file("/bob/big.bin", BOB_FILE_MB * MiB, as_uid=BOB.uid, hdfs_user=BOB.name)
    return block_files(hdfs) - before


def alice_transfers(hdfs: HdfsCluster, files: list[str], size_mb: int, gap: float, direction: str,
                    place: Callable[[int], None] = stay) -> list[float]:
    """alice's transfer times (s) of FILES (read, or written with `size_mb` MiB), `gap` s idle between them;
    `place(pid)` puts her client's JVM where it should run."""
    return [t.seconds for t in alice_transfer_records(hdfs, files, size_mb, gap, direction, place)]


def alice_transfer_records(hdfs: HdfsCluster, files: list[str], size_mb: int, gap: float,
                           direction: str, place: Callable[[int], None] = stay) -> list[Transfer]:
    """alice_transfers, each as the client reported it (a write's phases too)."""
    client = hdfs.start_interactive(files, gap, as_uid=ALICE.uid, hdfs_user=ALICE.name,
                                    write_bytes=size_mb * MiB if direction == "write" else 0)
    try:
        place(client.pid)
        out, err = client.communicate(timeout=900)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    if client.returncode != 0:
        cause = next((line for line in err.splitlines() if "Exception" in line and not line.startswith("\tat ")),
                     err[-2000:])
        raise RuntimeError(f"alice's client failed: {cause}")
    transfers = [Transfer.parse(line) for line in out.splitlines() if line.startswith("{")]
    return transfers[1:]   # the first one also pays for the client's cold start (class loading, JIT)


def add_client_cpu_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client-cpu", choices=tuple(CLIENT_CPU), default="shared",
                        help="shared: both clients' JVMs take their turn with the daemons on this host's cores; "
                             "alice-first: alice's in a cpu group of its own with the most shares; bob-last: "
                             "bob's in one with the fewest, so it runs on what the rest leave")


@contextlib.contextmanager
def client_placement(cpu_group: str | None, choice: str) -> Iterator[dict[str, Callable[[int], None]]]:
    """Where each user's client runs (--client-cpu): yields user -> `place(pid)` for alice and bob."""
    given = CLIENT_CPU[choice]
    with contextlib.ExitStack() as groups:
        yield {user.name: groups.enter_context(cpu_child(cpu_group, f"{user.name}-client", given[user.name]))
               if user.name in given else stay for user in (ALICE, BOB)}


def datanode_users(hdfs: HdfsCluster) -> dict:
    """Each user's counters in the DataNode's Java agent."""
    return ThrottleChannel(hdfs.throttle_socket(hdfs.datanodes[0])).stats().users


def moved_bytes(hdfs: HdfsCluster, direction: str) -> int:
    """Bytes the DataNode has moved so far in `direction`: its Java agent's count of every user's, or
    (no agent) its disk's as the kernel counts them."""
    if hdfs.datanode_throttle:
        return sum(getattr(u, f"{direction}_bytes") for u in datanode_users(hdfs).values())
    with open(f"/sys/dev/block/{hdfs.datanodes[0].device_number}/stat") as f:
        fields = f.read().split()
    return int(fields[2 if direction == "read" else 6]) * 512


def alice_waited_ns(hdfs: HdfsCluster, direction: str) -> int:
    """What alice's packets have waited in the DataNode's scheduler so far (ns; 0 without its Java agent)."""
    if not hdfs.datanode_throttle:
        return 0
    alice = datanode_users(hdfs).get(ALICE.name)
    return getattr(alice, f"{direction}_wait_ns") if alice else 0


@contextlib.contextmanager
def bob_busy(hdfs: HdfsCluster, direction: str, bob_blocks: set[str], delivered: list[float],
             place: Callable[[int], None] = stay) -> Iterator[None]:
    """bob moves data without pause; `delivered` gets what the DataNode moved for him alone (bytes/s, 2 s)."""
    if direction == "read":
        bob = hdfs.start_read("/bob/big.bin", as_uid=BOB.uid, hdfs_user=BOB.name, seconds=3600)
    else:
        # Over a few names, each write replacing the one before: a disk that fills up fails the run.
        bob = hdfs.start_interactive([f"/bob/w{i % BOB_WRITE_FILES}.bin" for i in range(1000)], 0, as_uid=BOB.uid,
                                     hdfs_user=BOB.name, write_bytes=256 * MiB)
    try:
        place(bob.pid)
        with CacheDropper(bob_blocks):
            time.sleep(5)   # past its JVM start and its first blocks
            before, t0 = moved_bytes(hdfs, direction), time.monotonic()
            time.sleep(2)
            delivered.append((moved_bytes(hdfs, direction) - before) / (time.monotonic() - t0))
            yield
    finally:
        bob.kill()
        bob.wait()


def turned_down(hdfs: HdfsCluster, files: list[str]) -> list[int]:
    """For each of alice's written FILES, how many times the NameNode turned down its completeFile."""
    counts = closes_turned_down(log_lines(hdfs.namenode.log))
    return [counts[path] for path in files]


def describe_turned_down(counts: list[int]) -> str:
    """'9 of 32 (12 retries)': writes whose first completeFile was turned down, and all retries."""
    return f"{sum(1 for n in counts if n)} of {len(counts)} ({sum(counts)} retries)"


def run_policy(hdfs: HdfsCluster, name: str, policy: str, args, bob_blocks: set[str],
               placement: dict[str, Callable[[int], None]], pass_number: int = 0) -> dict:
    results: dict = {}
    delivered: list[float] = []
    datanode_pids = [dn.pid for dn in hdfs.datanodes]
    with governed(hdfs, f"{name}-{pass_number}", policy, args.backend, int(args.disk_mbps * MB), args.bfq) as cluster, \
            CpuSpan(cluster_roles(cluster)) as cpu:
        for phase in PHASES:
            busy = (bob_busy(hdfs, args.direction, bob_blocks, delivered, placement[BOB.name])
                    if phase == "beside bob" else contextlib.nullcontext())
            with busy:
                for size in args.sizes:
                    files = alice_files(policy, phase, size, args.rounds + 1, pass_number)
                    waited = alice_waited_ns(hdfs, args.direction)
                    machine_before = machine_sample.take(datanode_pids)
                    times = alice_transfers(hdfs, files, size, args.gap, args.direction,
                                            placement[ALICE.name])
                    machine = machine_sample.describe(machine_before, machine_sample.take(datanode_pids))
                    waited = (alice_waited_ns(hdfs, args.direction) - waited) / len(files)
                    results[(phase, size)] = times
                    if args.direction == "write":
                        results[("turned down", phase, size)] = turned_down(hdfs, files[1:])
                    print(f"  {policy}{f' pass {pass_number + 1}' if args.passes > 1 else ''} {phase} {size} MiB: p50 {p50(times) * 1000:.0f} ms, "
                          f"p99 {p99(times) * 1000:.0f} ms, "
                          f"all {' '.join(f'{t * 1000:.0f}' for t in times)}"
                          + (f"; her packets waited {waited / 1e6:.0f} ms a transfer in the DataNode's scheduler"
                             if hdfs.datanode_throttle else "")
                          + (f"; completeFile turned down for {describe_turned_down(results[('turned down', phase, size)])}"
                             if args.direction == "write" else "")
                          + f"; {machine}", flush=True)
    results["delivered"] = delivered[0] if delivered else 0.0
    results["control_cpu"] = cpu.describe()
    return results


def pooled(runs: list[dict]) -> dict:
    """One policy's passes as one: its transfers and turned-down counts joined, bob's rate averaged."""
    joined: dict = {"delivered": statistics.mean(run["delivered"] for run in runs),
                    "control_cpu": " / ".join(run["control_cpu"] for run in runs)}
    for key in runs[0]:
        if key not in joined:
            joined[key] = [value for run in runs for value in run[key]]
    return joined


def report(results: dict[str, dict], args) -> None:
    share = args.disk_mbps * MB * 8 / 12
    print(f"\nalice (priority 8) {args.direction}s {', '.join(map(str, args.sizes))} MiB files, {args.gap} s idle "
          f"between them, {args.rounds * args.passes} of each; bob (4) never pauses; backend {args.backend}, "
          f"{args.disk_mbps:.0f} MB/s disk = configured bandwidth; alice's static share {share / MB:.0f} MB/s"
          + "".join(f"; {label} {', '.join(f'{k}={v}' for k, v in given.items())}"
                    for label, given in (("BFQ", args.bfq), ("hdfs-site", args.hdfs_site), ("disk queue", args.queue))
                    if given)
          + ("; the DataNode loads libhadoop (its read-ahead pool on)" if args.native else "")
          + (f"; {WARM_UP_NOTE}" if args.warm_up else "")
          + (f"; the DataNode's ext4 mounted {ext4_mount_options(args.ext4_options)}" if args.ext4_options else "")
          + (f"; clients' CPU {args.client_cpu}" if args.client_cpu != "shared" else "")
          + (f"; {args.passes} passes, in the order {', '.join(policy for _, policy in in_passes(args.policies, args.passes))}"
             if args.passes > 1 else ""))
    print("ratios are against static in the same run (target with bob: <= 1.2 at p50 and p99; alone: <= 1.0)\n")
    head = f"{'phase':<11} {'MiB':>4} | {'static p50/p99 ms':>18} |"
    compared = [policy for policy in args.policies if policy != "static"]
    for policy in compared:
        head += f" {policy + ' p50/p99 ms':>22} {'x p50':>6} {'x p99':>6} |"
    print(head)
    for phase in PHASES:
        for size in args.sizes:
            base = results["static"][(phase, size)]
            b50, b99 = p50(base), p99(base)
            line = f"{phase:<11} {size:>4} | {b50 * 1000:>8.0f} / {b99 * 1000:>7.0f} |"
            for policy in compared:
                t = results[policy][(phase, size)]
                t50, t99 = p50(t), p99(t)
                line += f" {t50 * 1000:>10.0f} / {t99 * 1000:>9.0f} {t50 / b50:>6.2f} {t99 / b99:>6.2f} |"
            print(line)
    print(f"\nthe ratios with their {CONFIDENCE:.0%} intervals (each side's transfers drawn again {DRAWS:,} times; "
          "an interval across the target says the run cannot tell):")
    for phase in PHASES:
        for size in args.sizes:
            base = results["static"][(phase, size)]
            print(f"  {phase} {size} MiB: " + ", ".join(
                f"{policy} {describe_ratios(results[policy][(phase, size)], base)}" for policy in compared))
    if args.direction == "write":
        print("\nalice's writes whose completeFile the NameNode turned down at first (the DataNode's report of "
              "the block not in yet; the client retries as hdfs-site above says):")
        for phase in PHASES:
            for size in args.sizes:
                print(f"  {phase} {size} MiB: " + ", ".join(
                    f"{policy} {describe_turned_down(results[policy][('turned down', phase, size)])}"
                    for policy in args.policies))
    print("\nthe DataNode with bob alone (MB/s, 2 s before alice's transfers beside him): "
          + ", ".join(f"{policy} {results[policy]['delivered'] / MB:.1f}" for policy in args.policies)
          + f"; alice's weighted share is 2/3 of it (static caps give her {share / MB:.0f} whatever it delivers)")
    print("vnode-sync's own processes over each policy's phases: "
          + "; ".join(f"{policy} {results[policy]['control_cpu']}" for policy in args.policies))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("datanode-throttle", "blkio-v1"), default="datanode-throttle")
    parser.add_argument("--direction", choices=("read", "write"), default="read")
    parser.add_argument("--rounds", type=int, default=20, help="transfers per size and phase")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16], help="MiB")
    parser.add_argument("--gap", type=float, default=1.5, help="alice's idle seconds between transfers")
    parser.add_argument("--disk-mbps", type=float, default=60.0)
    parser.add_argument("--bfq", type=key_values, default={},
                        help="blkio-v1 wc-weights: BFQ tunables of the loop device, e.g. timeout_sync=16")
    parser.add_argument("--hdfs-site", type=key_values, default={},
                        help="extra hdfs-site.xml settings of every daemon and client, e.g. dfs.datanode.readahead.bytes=0")
    parser.add_argument("--native", action="store_true",
                        help="the DataNode loads libhadoop, as production ones do: its own read-ahead "
                             "(dfs.datanode.readahead.bytes) works only then")
    parser.add_argument("--queue", type=key_values, default={},
                        help="the DataNode disk's block queue settings for every policy, e.g. max_sectors_kb=256 "
                             "(put back as they were at the end)")
    add_client_cpu_option(parser)
    add_ext4_options_option(parser)
    add_warm_up_option(parser)
    parser.add_argument("--passes", type=int, default=1, choices=range(1, 9), metavar="1..8",
                        help="run the policies this many times, each pass in the reverse order of the one before, "
                             "and pool each policy's transfers (default 1)")
    parser.add_argument("--policies", type=lambda text: policy_list(text, POLICIES, always=("static",)),
                        default=[policy for policy in POLICIES if policy != "static-again"],
                        help=f"comma-separated, of {', '.join(POLICIES)}; static, the baseline, always runs")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("interactive_shares: needs root (cgroups, loop devices, FUSE)", file=sys.stderr)
        return 2
    exit_once_on_signals()   # a kill or Ctrl-C, even twice, still unwinds every `with` and `finally` below
    if args.backend == "blkio-v1" and args.direction == "write":
        print("interactive_shares: blkio-v1 does not charge buffered writes (cgroup v1); use datanode-throttle",
              file=sys.stderr)
        return 2
    name = unique_name("inter")
    started = time.monotonic()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    disk = "spindle" if args.backend == "blkio-v1" else ("paced-rw" if args.direction == "write" else "paced")
    jar = datanode_throttle_jar() if args.backend == "datanode-throttle" else None
    if args.direction == "write":   # shown in the report with the --hdfs-site given, which overrides it
        args.hdfs_site = {**WRITE_SITE, **args.hdfs_site}
    site = {"dfs.block.access.token.enable": "true", **args.hdfs_site}
    alice_mb = args.passes * len(args.policies) * len(PHASES) * (args.rounds + 1) * sum(args.sizes)
    with cpu_priority(unique_name("inter-cpu")) as cpu_group, \
            client_placement(cpu_group, args.client_cpu) as placement, \
            HdfsCluster(name, datanodes=1, disk_mb=max(4096, 2 * (alice_mb + BOB_FILE_MB)), disk=disk,
                        disk_read_mbps=args.disk_mbps, hdfs_site=site, datanode_throttle=jar,
                        native=args.native, ext4_options=args.ext4_options) as hdfs:
        bob_blocks = write_files(hdfs, args)
        if args.warm_up:
            warm_up_mbps = warm_up_disks(hdfs, BOB.uid, BOB.name)
            print(f"[{time.monotonic() - started:.0f} s] warm-up file written at {warm_up_mbps:.1f} MB/s and deleted",
                  flush=True)
        hdfs.evict_page_cache()
        print(f"[{time.monotonic() - started:.0f} s] HDFS up, files written", flush=True)
        with queue_settings(hdfs.datanodes[0].loop_device, args.queue):
            runs: dict[str, list[dict]] = {policy: [] for policy in args.policies}
            for pass_number, policy in in_passes(args.policies, args.passes):
                runs[policy].append(run_policy(hdfs, name, policy, args, bob_blocks, placement, pass_number))
                print(f"[{time.monotonic() - started:.0f} s] {policy} pass {pass_number + 1} done", flush=True)
        # Before the teardown: a DataNode or cpu group slow to go must not cost a long run its report.
        report({policy: pooled(policy_runs) for policy, policy_runs in runs.items()}, args)
    print(f"\nran {time.monotonic() - started:.0f} s; load average at end: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
