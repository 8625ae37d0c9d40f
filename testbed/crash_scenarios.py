"""The state writes that must survive a kill at any syscall (issue 24), each as a scenario: make a
starting state, drive one state-changing step of the product in its own process, then start again
and say what that start holds: the state before the step, the state after it, or neither (a bug).

    python -m testbed.crash_scenarios [NAME...]          # kill at every point; print counts and outcomes

Each step runs the same call the product makes (the coordinator's store opening, set-priority, a move into a group and storage-node
write, the agent's state-cache write, the batch hook's spool write) in a process of its own that
stays single-threaded, so strace can name each call (testbed/crash_points.py). The real services
add threads (gRPC) around these calls but no other writes to these files.
"""

import argparse
import io
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import yaml

from testbed import crash_points

SEED_USERS = [{"name": "alice", "uid": 1001, "priority": 4, "active": True},
              {"name": "bob", "uid": 1002, "priority": 8, "active": False}]


class Neither(AssertionError):
    """A start after the kill found neither the state before the step nor the state after it."""


@dataclass(frozen=True)
class Scenario:
    name: str
    prepare: Callable[[str], None]   # workdir: the state before the step
    step: Callable[[str], None]      # the step, in the killed process
    holds: Callable[[str], str]      # start again: "before" or "after"; raises Neither


# ---- the coordinator's store ------------------------------------------------------------------

def _coordinator_config(workdir: str):
    from vnode_sync.coordinator.config import load_config
    return load_config(os.path.join(workdir, "coordinator.yaml"))


def _write_coordinator_config(workdir: str) -> None:
    with open(os.path.join(workdir, "coordinator.yaml"), "w") as f:
        yaml.safe_dump({"state_path": os.path.join(workdir, "state.sqlite"), "insecure": True, "users": SEED_USERS,
                        "storage_nodes": [{"id": "dn1", "devices": [
                            {"name": "/dev/vnode-sync-crash", "read_bps": 60_000_000, "write_bps": 30_000_000}]}]},
                       f)


def _start_coordinator_store(workdir: str):
    """What vnode-coordinator does with its state file when it starts (coordinator/main.py)."""
    from vnode_sync.coordinator.state.store import StateStore
    config = _coordinator_config(workdir)
    return StateStore(config.state_path, seed_users=config.users)


def _first_start(workdir: str) -> None:
    _start_coordinator_store(workdir).close()


def _restarted_store(workdir: str):
    from vnode_sync.coordinator.state.store import UNFINISHED_SUFFIX, StoreUnusable
    try:
        store = _start_coordinator_store(workdir)
    except StoreUnusable as e:
        raise Neither(f"the next start refused: {e}") from e
    if os.path.exists(store.path + UNFINISHED_SUFFIX):
        raise Neither("the next start left an unfinished store beside the state file")
    return store


def _first_start_holds(workdir: str) -> str:
    existed = os.path.exists(os.path.join(workdir, "state.sqlite"))
    store = _restarted_store(workdir)
    try:
        users = {u.name: (u.uid, u.priority, u.active_flag) for u in store.users()}
        generation, identity = store.generation(), store.store_id()
    finally:
        store.close()
    wanted = {u["name"]: (u["uid"], u["priority"], u["active"]) for u in SEED_USERS}
    if users != wanted or generation != 1 + len(SEED_USERS) or not identity:
        raise Neither(f"the store holds users {users}, generation {generation}, identity {identity}; "
                      f"a whole first start holds {wanted}, generation {1 + len(SEED_USERS)} and an identity")
    return "after" if existed else "before"   # before: no store was left, this start made it


def _prepare_store(workdir: str) -> None:
    _write_coordinator_config(workdir)
    _first_start(workdir)


def _set_priority(workdir: str) -> None:
    store = _start_coordinator_store(workdir)
    store.set_priority("alice", 9)   # what the Admin SetPriority call runs on the store thread
    store.close()


def _set_priority_holds(workdir: str) -> str:
    store = _restarted_store(workdir)
    try:
        state = (store.user("alice").priority, store.user("bob").priority, store.generation())
    finally:
        store.close()
    first = 1 + len(SEED_USERS)
    outcomes = {(4, 8, first): "before", (9, 8, first + 1): "after"}
    if state not in outcomes:
        raise Neither(f"alice, bob priorities and generation {state}: neither {(4, 8, first)} nor {(9, 8, first + 1)}")
    return outcomes[state]


def _prepare_group(workdir: str) -> None:
    """A store with a group `g1` (weight 2) and alice under the root."""
    from vnode_sync.coordinator.state.groups import GroupRecord
    _prepare_store(workdir)
    store = _start_coordinator_store(workdir)
    store.add_group(GroupRecord("g1", 2))
    store.close()


def _move_user(workdir: str) -> None:
    store = _start_coordinator_store(workdir)
    store.move_user("alice", "g1")   # what the Admin MoveUser call runs on the store thread
    store.close()


def _move_user_holds(workdir: str) -> str:
    store = _restarted_store(workdir)
    try:
        state = (store.user("alice").group, [(g.name, g.weight) for g in store.groups()], store.generation())
    finally:
        store.close()
    first = 2 + len(SEED_USERS)   # the seeded users' generations, then the group's
    outcomes = {("", first): "before", ("g1", first + 1): "after"}
    if state[1] != [("g1", 2)] or (state[0], state[2]) not in outcomes:
        raise Neither(f"alice's group, the groups and generation {state}: neither alice under the root at "
                      f"{first} nor in g1 at {first + 1}, with g1 (weight 2) kept")
    return outcomes[(state[0], state[2])]


def _prepare_nodes(workdir: str) -> None:
    """A store whose storage nodes were seeded from the file (the coordinator's first start does it)."""
    from vnode_sync.coordinator.commands.nodes import stored_nodes
    _prepare_store(workdir)
    store = _start_coordinator_store(workdir)
    stored_nodes(store, _coordinator_config(workdir))
    store.close()


def _set_storage_node(workdir: str) -> None:
    from vnode_sync.coordinator.cluster import Cluster
    from vnode_sync.wire import vnode_pb2 as pb
    store = _start_coordinator_store(workdir)
    cluster = Cluster(_coordinator_config(workdir), store)
    # What the Admin SetStorageNode call runs on the store thread (vnodectl nodes set, measure-capacity --apply).
    cluster.node_commands.set("dn1", [pb.Device(name="/dev/vnode-sync-crash", read_bps=120_000_000,
                                                write_bps=90_000_000)], [], None, "admin:crash")
    store.close()


def _set_storage_node_holds(workdir: str) -> str:
    import json
    store = _restarted_store(workdir)
    try:
        nodes, generation = store.storage_nodes(), store.generation()
    finally:
        store.close()
    device = json.loads(nodes["dn1"])["devices"][0] if nodes and "dn1" in nodes else {}
    state = (device.get("read_bps"), device.get("write_bps"), generation)
    first = 1 + len(SEED_USERS)
    outcomes = {(60_000_000, 30_000_000, first): "before", (120_000_000, 90_000_000, first + 1): "after"}
    if state not in outcomes:
        raise Neither(f"dn1's capacities and the generation {state}: neither of {sorted(outcomes)}")
    return outcomes[state]


# ---- the storage agent's state cache ----------------------------------------------------------

def _cached_state(generation: int):
    from vnode_sync.wire import vnode_pb2 as pb
    return pb.DesiredState(generation=generation, node_id="dn1", store_id=77,
                           vnodes=[pb.VNodeSpec(user="alice", uid=1001, priority=4, shares=[
                               pb.ResourceShare(device="/dev/sdb", read=pb.Share(ceiling_bps=generation * 1_000_000))])])


def _save_cache(workdir: str, generation: int) -> None:
    from vnode_sync.agents.storage.state_cache import save_state_cache
    save_state_cache(os.path.join(workdir, "agent.state"), _cached_state(generation))


def _cache_holds(workdir: str) -> str:
    from vnode_sync.agents.storage.state_cache import BadCache, decode_state_cache
    path = os.path.join(workdir, "agent.state")
    try:
        with open(path, "rb") as f:   # as StorageAgent._load_cached_state reads it at start
            state = decode_state_cache(f.read())
    except (OSError, BadCache) as e:
        raise Neither(f"the agent's next start finds no usable cache: {e}") from e
    if state != _cached_state(state.generation) or state.generation not in (1, 2):
        raise Neither(f"the cache holds generation {state.generation}, not 1 or 2 as written")
    return "before" if state.generation == 1 else "after"


# ---- the batch hooks' spool -------------------------------------------------------------------

def _job_event(phase: str):
    from vnode_sync.batch.jobs import JobEvent, JobPhase
    return JobEvent(JobPhase(phase), "7", "alice", 1001, "cn1", account="physics")


def _spool(workdir: str, phase: str) -> None:
    from vnode_sync.batch.spool import EventSpool
    EventSpool(os.path.join(workdir, "spool")).save(_job_event(phase))   # as run_hook spools an undelivered event


def _spool_holds(workdir: str) -> str:
    from vnode_sync.batch.spool import EventSpool
    from vnode_sync.batch.spool import log as spool_log
    caught = io.StringIO()
    handler = logging.StreamHandler(caught)
    spool_log.addHandler(handler)
    try:
        pending = EventSpool(os.path.join(workdir, "spool")).pending()   # what the next hook or reconcile sends
    finally:
        spool_log.removeHandler(handler)
    if caught.getvalue():
        raise Neither(f"the spool has an unreadable event: {caught.getvalue().strip()}")
    outcomes = {(_job_event("start"),): "before", (_job_event("end"),): "after"}
    if tuple(pending) not in outcomes:
        raise Neither(f"the spool holds {pending}, neither the start nor the end of job 7")
    return outcomes[tuple(pending)]


SCENARIOS = {s.name: s for s in (
    Scenario("first-start", _write_coordinator_config, _first_start, _first_start_holds),
    Scenario("set-priority", _prepare_store, _set_priority, _set_priority_holds),
    Scenario("set-storage-node", _prepare_nodes, _set_storage_node, _set_storage_node_holds),
    Scenario("move-user", _prepare_group, _move_user, _move_user_holds),
    Scenario("agent-cache", lambda w: _save_cache(w, 1), lambda w: _save_cache(w, 2), _cache_holds),
    Scenario("spool", lambda w: _spool(w, "start"), lambda w: _spool(w, "end"), _spool_holds),
)}


# ---- running ----------------------------------------------------------------------------------

@dataclass
class Report:
    scenario: str
    points: list[crash_points.CrashPoint] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)       # before / after / neither / not killed
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        calls = ", ".join(f"{name} {n}" for name, n in Counter(p.syscall for p in self.points).most_common())
        outcomes = ", ".join(f"{k} {self.outcomes[k]}" for k in ("before", "after", "neither", "not killed"))
        return (f"{self.scenario}: {len(self.points)} kill points ({calls}); after each kill the next start held: "
                f"{outcomes}; {self.seconds:.1f} s")


def _step_argv(name: str, workdir: str) -> list[str]:
    return [sys.executable, "-m", "testbed.crash_scenarios", "step", name, workdir]


def _fresh(scenario: Scenario, workdir: str) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    scenario.prepare(workdir)


# A step that ran to its end without reaching a call the first run made is run once more before it
# counts: once in many runs, the store's close after a long benchmark did not remove its WAL (unlinks
# 5 and 6 of the set-priority step not reached, exit 0; not reproduced in 40 runs since, nor its cause
# found). What the step left beside it is printed.
NOT_REACHED_TRIES = 2


def run(name: str, base: str, workers: int = 2) -> Report:
    """Kill the scenario's step at each point, from a fresh starting state each time, and start again.
    The killed steps run `workers` at a time, each in a workdir of its own; the starting states and
    the starts after a kill run here one at a time (they share this process's loggers)."""
    scenario, report, started = SCENARIOS[name], Report(name), time.monotonic()
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    workdir = os.path.join(base, name)
    _fresh(scenario, workdir)
    report.points = crash_points.find_points(_step_argv(name, workdir), env, os.path.join(base, f"{name}.strace"))
    if scenario.holds(workdir) != "after":
        report.failures.append("the step run to its end did not hold the state after it")
    shutil.rmtree(workdir, ignore_errors=True)
    in_process = threading.Lock()

    def kill_once(numbered: tuple[int, crash_points.CrashPoint], tries: int = NOT_REACHED_TRIES) -> tuple[str, str | None]:
        """(outcome, failure or None) of one kill at the point."""
        number, point = numbered
        killed_dir = os.path.join(base, f"{name}.{number}")
        with in_process:
            _fresh(scenario, killed_dir)
        try:
            killed = crash_points.kill_at(point, _step_argv(name, killed_dir), env)
            if killed.returncode != -9:
                missed = (f"{point}: not reached (exit {killed.returncode}; left {sorted(os.listdir(killed_dir))}) "
                          f"{killed.stderr[-500:]}")
                if tries > 1:
                    print(f"{missed}; trying again", file=sys.stderr)
                    shutil.rmtree(killed_dir, ignore_errors=True)
                    return kill_once(numbered, tries - 1)
                return "not killed", missed
            with in_process:
                return scenario.holds(killed_dir), None
        except Neither as e:
            return "neither", f"killed before {point}: {e}"
        finally:
            shutil.rmtree(killed_dir, ignore_errors=True)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for outcome, failure in pool.map(kill_once, enumerate(report.points)):
            report.outcomes[outcome] += 1
            if failure:
                report.failures.append(failure)
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["step"]:   # the process the kills interrupt: step NAME WORKDIR
        SCENARIOS[argv[1]].step(argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(SCENARIOS), metavar="NAME",
                        help=f"scenarios (default all: {', '.join(SCENARIOS)})")
    args = parser.parse_args(argv)
    unknown = set(args.names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    logging.basicConfig(level=logging.ERROR)   # a restart's notice of a remade first start is an expected outcome
    why = crash_points.missing()
    if why:
        print(f"cannot inject faults here: {why}", file=sys.stderr)
        return 2
    failed = False
    with tempfile.TemporaryDirectory(prefix="vnode-sync-test.crash.") as base:
        for name in args.names:
            report = run(name, base)
            print(report.summary(), flush=True)
            for failure in report.failures:
                print(f"  FAILED {failure}")
            failed |= bool(report.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
