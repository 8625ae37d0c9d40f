"""The work-conserving policy through the Lustre TBF backend, against the lctl STAND-IN (not Lustre:
Lustre cannot run here; tests/lustre_standin says what it models).

A real coordinator process (work-conserving) and a real storage agent process (backend lustre-tbf)
whose `lctl` is the stand-in behind a wrapper that logs every command. A traffic model offers each
reading user more RPCs than its rule lets through and counts what is served in job_stats, as an OSS
would; the agent reports it, the coordinator allocates bytes/s, and the agent turns each allocation
into a per-partition RPC rate with `change NAME rate=` on the rule it started. Every lctl call is a
process here, so the times are the stand-in's, not Lustre's: they are printed, not asserted tightly.
"""

import os
import threading
import time

import pytest

from tests.conftest import unique_name
from tests.lustre_standin import LCTL, SERVICE, StandInOss
from testbed.local_cluster import LocalCluster, LocalNode, LocalUser
from vnode_sync.kernel.lustre_rules import RuleList

pytestmark = [pytest.mark.slow]

MB, MiB = 1_000_000, 1 << 20
NODE_BW = 100 * MB
PARTITIONS = 2
RPC = MiB                                       # brw_size 1 MiB
ALICE, BOB = LocalUser("alice", 64_611, 8), LocalUser("bob", 64_612, 4)


def rpc_rate(bps: float) -> int:
    """The per-partition TBF rate the backend makes of `bps` (rounded down, lustre_rates.RateConversion)."""
    return int(bps // (RPC * PARTITIONS))


def some_block_device() -> str | None:
    """A block device path that exists here (the OST's device; nothing reads or writes it)."""
    for name in sorted(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else []:
        if os.path.exists(f"/dev/{name}"):
            return f"/dev/{name}"
    return None


class Traffic:
    """Each reading user offers 4x the node's BW in RPCs; its rule serves what it allows, for the time
    that passed since the last round (so a loaded host slows the model, not the traffic)."""

    def __init__(self, oss: StandInOss):
        self.oss, self.reading = oss, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        last = time.monotonic()
        while not self._stop.wait(0.1):
            now = time.monotonic()
            for user in list(self.reading):
                self.oss.serve(user.uid, f"dd.{user.uid}", offered_per_cpt=4 * rpc_rate(NODE_BW), seconds=now - last,
                               cpts=tuple(range(PARTITIONS)))
            last = now

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def rates(oss: StandInOss) -> dict[str, int]:
    """Each user's TBF rule rate in the first partition (every partition has the same)."""
    listing = RuleList.parse(oss.run("get_param", "-n", f"{SERVICE}.nrs_tbf_rule").stdout)
    out = {}
    for name in ("vnode_alice", "vnode_bob"):
        rule = listing.views(name).get(("regular", 0))
        if rule is not None:
            out[name] = rule.rate
    return out


def wait_rates(oss: StandInOss, want, timeout: float, what: str) -> float:
    """Seconds until `want(rates)` holds; fails with the last rates seen."""
    started = time.monotonic()
    seen = {}
    while time.monotonic() - started < timeout:
        seen = rates(oss)
        if want(seen):
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s; TBF rates per partition: {seen}")


def test_standin_allocations_become_tbf_rule_rates_lent_and_taken_back(tmp_path, monkeypatch):
    device = some_block_device()
    if device is None:
        pytest.skip("needs a block device node in /dev for the OST (none under /sys/block)")
    oss = StandInOss(tmp_path, partitions=PARTITIONS, brw_size_mib=1)
    monkeypatch.setenv("VNODE_LCTL_STANDIN_STATE", oss.state_path)   # inherited by the agent process
    commands = tmp_path / "lctl-commands.log"
    lctl = tmp_path / "lctl-logged"
    lctl.write_text(f'#!/bin/sh\necho "$*" >> "{commands}"\nexec "{oss.lctl}" "$@"\n')
    lctl.chmod(0o755)
    assert os.path.exists(LCTL)
    node = LocalNode("oss1", (device,), NODE_BW, NODE_BW, settings={
        "backend": "lustre-tbf", "report_seconds": 0.5,
        "lustre": {"experimental": True, "lctl": str(lctl), "targets": {"lustre-OST0000": device}, "ledger": str(tmp_path / "ledger.json")}})
    policy = {"sharing": "work-conserving", "control_seconds": 0.5}
    with LocalCluster(unique_name("tbf-fair"), [ALICE, BOB], [node], coordinator_settings={"policy": policy}) \
            as cluster, Traffic(oss) as traffic:
        traffic.reading = {ALICE, BOB}
        # Both read: Algorithm 1's 2:1 (66.7 and 33.3 MB/s) as rates of 1 MiB RPCs per partition.
        wait_rates(oss, lambda r: r.get("vnode_alice") == rpc_rate(NODE_BW * 8 / 12)
                   and r.get("vnode_bob") == rpc_rate(NODE_BW * 4 / 12), 30, "both reading: 2:1")
        traffic.reading = {ALICE}
        # One allocation, two rule changes (one lctl call each): wait for both. bob keeps his probe.
        lent = wait_rates(oss, lambda r: r.get("vnode_alice", 0) >= rpc_rate(0.9 * NODE_BW)
                          and r.get("vnode_bob", 99) <= rpc_rate(0.05 * NODE_BW) + 1, 30,
                          "bob idle: alice lent his share")
        traffic.reading = {ALICE, BOB}
        back = wait_rates(oss, lambda r: r.get("vnode_bob", 0) >= rpc_rate(0.9 * NODE_BW * 4 / 12), 30,
                          "bob back: his share taken back")
        status = cluster.status()
        print(f"lustre-tbf stand-in: lent in {lent:.2f} s, taken back in {back:.2f} s")

    log = commands.read_text()
    # Each allocation became a rate change of the rule vnode-sync started, not a new rule.
    assert f"set_param {SERVICE}.nrs_tbf_rule=start vnode_alice uid={{{ALICE.uid}}}" in log
    changes = [line for line in log.splitlines() if "nrs_tbf_rule=change vnode_alice rate=" in line]
    assert len(changes) >= 2, log
    assert log.count("start vnode_alice") == 1 and log.count("stop vnode_alice") == 1, log   # the stop: teardown
    assert status["sharing"] == "work-conserving"
    alice = next(u for u in status["users"] if u["name"] == "alice")
    assert alice["nodes"][0]["allocated_read_bps"] > 0
