"""Coordinator failover on ZooKeeper (issue 28): what a site sees while its leader dies.

    sudo .venv/bin/python -m benchmarks.ha_failover kills [--kills 20]
    sudo .venv/bin/python -m benchmarks.ha_failover partition [--rounds 5]
    sudo .venv/bin/python -m benchmarks.ha_failover zk-restart [--rounds 3]
    sudo .venv/bin/python -m benchmarks.ha_failover history [--clients 5 --changes 200 --kills 5]

Everything is real: a three-server ZooKeeper ensemble on loopback (Debian's package), three
coordinator processes (one leads), and for `kills` two vnode-agent processes enforcing blkio-v1
VNodes on a loop device. Clients are given every coordinator's address and follow the leader.

- kills: a client loops on set-priority of carol (an inactive user: every change is a new
  generation every agent applies, and no active user's limit may move) while the leader is
  SIGKILLed `--kills` times (the killed one is restarted as a standby, as its service manager
  would). Prints the time from each kill to the first acknowledged change (p50 / max, against
  the ZooKeeper session timeout), whether every acknowledged change is in the final state and in
  the leaders' audit lines in order, whether any agent applied a lower generation, and how many
  distinct kernel limit sets the agents' blkio throttle files showed (sampled every 50 ms).
- partition: the leader reaches ZooKeeper through one server only; that server is SIGKILLed
  (even rounds) or frozen with SIGSTOP (odd rounds: a silent partition, seen only by timeouts).
  Prints when the leader's agent stream ended (it stops publishing), when a standby served,
  and whether any generation was published by both.
- zk-restart: vnodectl set-priority runs in a loop (one process per call, every address given)
  while each ZooKeeper server in turn is restarted; prints the calls and the errors vnodectl
  printed (none is the aim).
- history: `--clients` clients each make `--changes` set-priority calls (unique (user, priority)
  pairs, the clients' calls interleaved on the same users) while the leader is SIGKILLed
  `--kills` times; the checker reads the leaders' audit lines and checks that every acknowledged
  change was made, that changes acknowledged one before another started were made in that order
  (generation), that no two changes share a generation, that each user's changes chain (no lost
  update), and that the final state is the last change of each user.
"""

import argparse
import glob
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import grpc

from testbed.ha_coordinators import HACoordinators, HALocalCluster
from testbed.local_cluster import LocalNode, LocalUser
from testbed.loopdev import loop_device
from testbed.processes import exit_once_on_signals
from testbed.zookeeper_ensemble import ZooKeeperEnsemble
from vnode_sync.kernel.backend import HostCgroups
from vnode_sync.wire import vnode_pb2 as pb
from vnode_sync.wire import vnode_pb2_grpc as pb_grpc
from vnode_sync.wire.leader import dial

MB = 1_000_000
SERVE_WITHIN_SECONDS = 15.0
# An answer sent just before a kill or a cut still arrives after it (loopback: well within this).
IN_FLIGHT_SECONDS = 0.1
CONFIG = {"users": [{"name": "alice", "uid": 64_301, "priority": 4, "active": True},
                    {"name": "bob", "uid": 64_302, "priority": 8, "active": True},
                    {"name": "carol", "uid": 64_303, "priority": 10, "active": False}],
          "storage_nodes": [{"id": "dn1", "devices": [{"name": "/dev/loop7", "read_bps": 60 * MB,
                                                       "write_bps": 30 * MB}]}]}
_AUDIT = re.compile(r"action=set-priority user=(\S+) old=(\d+) new=(\d+) generation=(\d+)")
_APPLIED = re.compile(r"applied generation (\d+)")


def run_name(kind: str) -> str:
    return f"vnode-sync-bench.ha.{os.getpid()}.{kind}"


@dataclass
class Call:
    client: int
    user: str
    value: int
    started: float
    ended: float
    ok: bool
    error: str = ""


class Looper:
    """A client calling set-priority over and over through a channel to every coordinator."""

    def __init__(self, addresses: str, client: int, changes: list[tuple[str, int]], pause: float = 0.0,
                 stop: threading.Event | None = None):
        self.addresses, self.client, self.changes, self.pause = addresses, client, changes, pause
        self.calls: list[Call] = []
        self.stop = stop or threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with dial(self.addresses, grpc.insecure_channel) as channel:
            admin = pb_grpc.AdminStub(channel)
            i = 0
            while not self.stop.is_set() and i < len(self.changes):
                user, value = self.changes[i]
                started = time.monotonic()
                try:
                    admin.SetPriority(pb.SetPriorityRequest(user=user, priority=value), timeout=30)
                    self.calls.append(Call(self.client, user, value, started, time.monotonic(), True))
                except grpc.RpcError as e:
                    self.calls.append(Call(self.client, user, value, started, time.monotonic(), False,
                                           f"{e.code().name}: {e.details()}"))
                i += 1
                if self.pause:
                    time.sleep(self.pause)

    def first_ack_after(self, moment: float) -> float | None:
        return next((c.ended for c in self.calls if c.ok and c.ended > moment), None)


def audit_lines(coordinators: HACoordinators) -> list[tuple[str, int, int, int]]:
    """(user, old, new, generation) of every set-priority any coordinator recorded, by generation; a
    call that changed nothing (a retry of a change already made) is left out."""
    found = []
    for i in range(len(coordinators.ports)):
        with open(coordinators.log_path(i), errors="replace") as f:
            found += [(m[1], int(m[2]), int(m[3]), int(m[4])) for m in _AUDIT.finditer(f.read()) if m[2] != m[3]]
    return sorted(found, key=lambda a: a[3])


class LimitSampler:
    """Every 50 ms, every blkio throttle file under the given cgroup subtrees: the distinct sets seen."""

    def __init__(self, subtrees: list[str]):
        self.subtrees = subtrees
        self.seen: dict[str, float] = {}   # snapshot text -> first seen (monotonic)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def snapshot(self) -> str:
        values = []
        for subtree in self.subtrees:
            for path in sorted(glob.glob(os.path.join(subtree, "**", "blkio.throttle.*_device"), recursive=True)):
                try:
                    with open(path) as f:
                        values.append(f"{os.path.relpath(path, subtree)}={f.read().strip()}")
                except OSError:
                    values.append(f"{os.path.relpath(path, subtree)}=(gone)")
        return "\n".join(values)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.seen.setdefault(self.snapshot(), time.monotonic())
            self.samples += 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def applied_generations(cluster: HALocalCluster, node_id: str) -> list[int]:
    with open(os.path.join(cluster.workdir, f"agent-{node_id}.log"), errors="replace") as f:
        return [int(m[1]) for m in _APPLIED.finditer(f.read())]


# ---- kills -------------------------------------------------------------------------------------

def kills(args) -> dict:
    name = run_name("kills")
    with loop_device(name) as (device, _), ZooKeeperEnsemble(name) as zk:
        nodes = [LocalNode(f"dn{i}", (device,), 60 * MB, 30 * MB) for i in (1, 2)]
        users = [LocalUser(u["name"], u["uid"], u["priority"], u["active"]) for u in CONFIG["users"]]
        with HALocalCluster(name, users, nodes, zk.hosts, count=3,
                            session_timeout_seconds=args.session_seconds) as cluster:
            coordinators = cluster.coordinators
            sampler = LimitSampler([os.path.join(HostCgroups().blkio_v1, cluster.cgroup_name(n.node_id))
                                    for n in nodes])
            first = sampler.snapshot()
            sampler.start()
            looper = Looper(cluster.address, 0, [("carol", 1 + i % 100) for i in range(10**6)], pause=0.02)
            looper.thread.start()
            served = []
            try:
                for k in range(args.kills):
                    time.sleep(args.between)
                    leader = coordinators.wait_for_leader()
                    killed_at = time.monotonic()
                    coordinators.kill(leader, signal.SIGKILL)
                    while looper.first_ack_after(killed_at + IN_FLIGHT_SECONDS) is None \
                            and time.monotonic() - killed_at < 60:
                        time.sleep(0.05)
                    ack = looper.first_ack_after(killed_at + IN_FLIGHT_SECONDS)
                    served.append((ack - killed_at) if ack else float("inf"))
                    print(f"kill {k + 1}: coordinator {leader}; a standby served after {served[-1]:.2f} s",
                          flush=True)
                    coordinators.start_one(leader)   # back as a standby, as its service manager would
                time.sleep(args.between)
            finally:
                looper.stop.set()
                looper.thread.join(60)
                sampler.stop()
            while looper.calls and not looper.calls[-1].ok:   # the last word must be an acknowledged one
                looper.calls.pop()
            final = {u.name: u.priority for u in pb_grpc.AdminStub(dial(cluster.address, grpc.insecure_channel))
                     .ListUsers(pb.ListUsersRequest(), timeout=30).users}
            time.sleep(2)
            acked = [c.value for c in looper.calls if c.ok]
            committed = [new for user, _, new, _ in audit_lines(coordinators) if user == "carol"]
            it = iter(committed)
            in_order = all(any(value == c for c in it) for value in acked)
            applied = {n.node_id: applied_generations(cluster, n.node_id) for n in nodes}
            lower = {node: sum(1 for a, b in zip(seq, seq[1:]) if b < a) for node, seq in applied.items()}
            limit_sets = [s for s in sampler.seen if s]
            limit_files = len(first.splitlines())
            return {
                "kills": args.kills, "session_timeout_s": args.session_seconds,
                "serve_p50_s": statistics.median(served), "serve_max_s": max(served),
                "within_15_s": all(s <= SERVE_WITHIN_SECONDS for s in served),
                "calls": len(looper.calls), "acknowledged": len(acked),
                "errors": len(looper.calls) - len(acked),
                "final_is_last_acknowledged": final.get("carol") == (acked[-1] if acked else None),
                "acknowledged_in_audit_in_order": in_order,
                "generations_applied": {node: len(seq) for node, seq in applied.items()},
                "lower_generation_applied": lower, "limit_samples": sampler.samples,
                "limit_files_sampled": limit_files, "distinct_limit_sets": len(limit_sets),
                "limits_as_at_start": limit_sets == [first],
            }


# ---- partition ---------------------------------------------------------------------------------

class Stream:
    """An agent-like WatchDesiredState stream to one coordinator: generations sent, when it ended."""

    def __init__(self, address: str):
        self.generations: list[int] = []
        self.ended_at: float | None = None
        self._channel = grpc.insecure_channel(address)
        self._call = pb_grpc.AgentLinkStub(self._channel).WatchDesiredState(pb.WatchRequest(node_id="dn1"))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for state in self._call:
                self.generations.append(state.generation)
        except grpc.RpcError:
            pass
        self.ended_at = time.monotonic()

    def close(self) -> None:
        self._call.cancel()
        self._channel.close()


def partition(args) -> dict:
    rounds = []
    for r in range(args.rounds):
        name = run_name(f"partition{r}")
        with ZooKeeperEnsemble(name) as zk:
            servers = zk.servers
            others = ",".join(s.address for s in servers[1:])
            coordinators = HACoordinators(name, [servers[0].address, others, others], CONFIG, 3,
                                          args.session_seconds)
            try:
                coordinators.start_one(0)
                coordinators.wait_for_leader()
                coordinators.start_one(1)
                coordinators.start_one(2)
                looper = Looper(coordinators.addresses, 0, [("carol", 1 + i % 100) for i in range(10**6)], 0.05)
                looper.thread.start()
                old = Stream(f"127.0.0.1:{coordinators.ports[0]}")
                time.sleep(1.0)
                # Even rounds: the server dies (connections reset); odd ones: it freezes (SIGSTOP), as
                # behind a silent network partition: the leader sees nothing until its pings time out.
                how = "killed" if r % 2 == 0 else "frozen"
                # If it was ZooKeeper's own leader, the other two elect one first; sessions then start
                # their timeout anew on it (a standby takes over later by that election).
                was_zookeeper_leader = servers[0].mode() == "leader"
                cut_at = time.monotonic()
                if how == "killed":
                    zk.stop_server(0, signal.SIGKILL)
                else:
                    servers[0].process.send_signal(signal.SIGSTOP)
                new_leader = coordinators.wait_for_leader(timeout=60, among=(1, 2))
                new = Stream(f"127.0.0.1:{coordinators.ports[new_leader]}")
                # The first answer of the new leader: after the old one stopped (it answers nothing then).
                while old.ended_at is None or looper.first_ack_after(old.ended_at + IN_FLIGHT_SECONDS) is None:
                    if time.monotonic() - cut_at > 60:
                        break
                    time.sleep(0.05)
                time.sleep(1.0)
                looper.stop.set()
                looper.thread.join(60)
                new.close()
                exited = coordinators.processes[0].wait(4 * args.session_seconds + 10)
                if how == "frozen":
                    servers[0].process.send_signal(signal.SIGCONT)
                ack = looper.first_ack_after((old.ended_at or cut_at) + IN_FLIGHT_SECONDS)
                rounds.append({"zookeeper_server": how, "it_led_zookeeper": was_zookeeper_leader,
                               "stopped_publishing_s": (old.ended_at or float("inf")) - cut_at,
                               "standby_served_s": (ack - cut_at) if ack else float("inf"),
                               "old_leader_exit": exited,
                               "shared_generations": sorted(set(old.generations) & set(new.generations)),
                               "old_max": max(old.generations), "new_min": min(new.generations)})
                print(f"partition {r + 1}: {rounds[-1]}", flush=True)
            finally:
                coordinators.stop()
    return {"rounds": len(rounds), "session_timeout_s": args.session_seconds,
            "stopped_publishing_max_s": max(r["stopped_publishing_s"] for r in rounds),
            "standby_served_p50_s": statistics.median(r["standby_served_s"] for r in rounds),
            "standby_served_max_s": max(r["standby_served_s"] for r in rounds),
            "generation_published_by_two": sum(len(r["shared_generations"]) for r in rounds),
            "old_leader_exited_non_zero": all(r["old_leader_exit"] != 0 for r in rounds)}


# ---- zk-restart --------------------------------------------------------------------------------

def zk_restart(args) -> dict:
    name = run_name("zkrestart")
    with ZooKeeperEnsemble(name) as zk, HACoordinators(name, zk.hosts, CONFIG, 3, args.session_seconds) as co:
        stop = threading.Event()
        results: list[tuple[int, str]] = []

        def loop() -> None:
            i = 0
            while not stop.is_set():
                done = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--coordinator", co.addresses,
                                       "--insecure", "set-priority", "carol", str(1 + i % 100)],
                                      capture_output=True, text=True, timeout=120)
                results.append((done.returncode, done.stderr.strip()))
                i += 1
        looper = threading.Thread(target=loop, daemon=True)
        looper.start()
        leader_changes, before = 0, co.leader()
        for r in range(args.rounds):
            for index in range(len(zk.servers)):
                time.sleep(2.0)
                zk.stop_server(index)
                time.sleep(1.0)
                zk.start_server(index)
                print(f"round {r + 1}: restarted ZooKeeper server {index + 1}; vnodectl calls so far "
                      f"{len(results)}, errors {sum(1 for c, _ in results if c)}", flush=True)
        time.sleep(2.0)
        stop.set()
        looper.join(180)
        after = co.leader()
        leader_changes = int(before != after)
        errors = [e for c, e in results if c]
        return {"restarts": args.rounds * len(zk.servers), "vnodectl_calls": len(results),
                "vnodectl_errors": len(errors), "first_errors": errors[:3], "leader_changed": leader_changes}


# ---- history -----------------------------------------------------------------------------------

def check_history(calls: list[Call], audit: list[tuple[str, int, int, int]], final: dict[str, int],
                  initial: dict[str, int]) -> dict:
    """The checks of `history` (see the module's doc), each as a count of violations."""
    made = {(user, new): generation for user, _, new, generation in audit}
    acked = [c for c in calls if c.ok]
    unacked = {(c.user, c.value) for c in calls if not c.ok}
    missing = [c for c in acked if (c.user, c.value) not in made]
    order = sorted(acked, key=lambda c: c.ended)
    out_of_order = 0
    earliest_start_after: list[Call] = sorted(acked, key=lambda c: c.started)
    for a in order:   # every b that started after a ended must have a later generation
        for b in earliest_start_after:
            if b.started > a.ended and (a.user, a.value) in made and (b.user, b.value) in made \
                    and made[(b.user, b.value)] < made[(a.user, a.value)]:
                out_of_order += 1
    generations = [g for *_, g in audit]
    shared = len(generations) - len(set(generations))
    broken_chain, last = 0, dict(initial)
    for user, old, new, _ in audit:
        if old != last.get(user) and (user, old) not in unacked:   # else an unanswered change whose line was lost
            broken_chain += 1
        last[user] = new
    final_wrong = sum(1 for user, value in last.items() if final.get(user) != value)
    return {"acknowledged": len(acked), "not_acknowledged": len(calls) - len(acked),
            "acknowledged_missing": len(missing), "real_time_order_violations": out_of_order,
            "generations_shared": shared, "lost_updates": broken_chain, "final_state_wrong": final_wrong}


def history(args) -> dict:
    name = run_name("history")
    users = [f"h{i}" for i in range(args.clients * args.changes // 100 + 1)]
    config = {**CONFIG, "users": CONFIG["users"] + [{"name": u, "uid": 64_400 + i, "priority": 50}
                                                    for i, u in enumerate(users)]}
    with ZooKeeperEnsemble(name) as zk, HACoordinators(name, zk.hosts, config, 3, args.session_seconds) as co:
        loopers = []
        for c in range(args.clients):
            changes = []
            for k in range(args.changes):
                index = k * args.clients + c   # the clients' k-th calls go to the same user
                changes.append((users[index // 100], index % 100 + 1))
            # Paced so that the calls span every kill (each: --between of service, then a failover).
            pace = args.kills * (args.between + args.session_seconds + 1) / args.changes
            loopers.append(Looper(co.addresses, c, changes, pause=pace))
        for looper in loopers:
            looper.thread.start()
        kills_done = 0
        while kills_done < args.kills and any(l.thread.is_alive() for l in loopers):
            time.sleep(args.between)
            leader = co.wait_for_leader()
            co.kill(leader, signal.SIGKILL)
            kills_done += 1
            print(f"kill {kills_done}: coordinator {leader}; calls so far "
                  f"{sum(len(l.calls) for l in loopers)}", flush=True)
            co.wait_for_leader(timeout=60)
            co.start_one(leader)
        for looper in loopers:
            looper.thread.join(600)
        final = {u.name: u.priority for u in pb_grpc.AdminStub(dial(co.addresses, grpc.insecure_channel))
                 .ListUsers(pb.ListUsersRequest(), timeout=30).users}
        time.sleep(1.0)
        calls = [c for l in loopers for c in l.calls]
        result = check_history(calls, [a for a in audit_lines(co) if a[0] in users], final, {u: 50 for u in users})
        return {"clients": args.clients, "changes_each": args.changes, "kills": kills_done,
                "session_timeout_s": args.session_seconds, **result}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ha_failover", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=("kills", "partition", "zk-restart", "history"))
    parser.add_argument("--kills", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--between", type=float, default=3.0, help="seconds of normal service between kills")
    parser.add_argument("--session-seconds", type=float, default=10.0,
                        help="ZooKeeper session timeout of the coordinators (the config's default: 10)")
    args = parser.parse_args(argv)
    exit_once_on_signals()
    if args.scenario == "kills":
        args.kills = args.kills or 20
        result = kills(args)
        ok = result["within_15_s"] and result["final_is_last_acknowledged"] and result["acknowledged_in_audit_in_order"] \
            and not any(result["lower_generation_applied"].values()) and result["limits_as_at_start"]
    elif args.scenario == "partition":
        args.rounds = args.rounds or 5
        result = partition(args)
        ok = result["stopped_publishing_max_s"] < args.session_seconds and not result["generation_published_by_two"]
    elif args.scenario == "zk-restart":
        args.rounds = args.rounds or 3
        result = zk_restart(args)
        ok = result["vnodectl_errors"] == 0
    else:
        args.kills = args.kills or 5
        result = history(args)
        ok = not any(result[k] for k in ("acknowledged_missing", "real_time_order_violations", "generations_shared",
                                         "lost_updates", "final_state_wrong"))
    print(json.dumps({"scenario": args.scenario, "ok": ok, **result}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
