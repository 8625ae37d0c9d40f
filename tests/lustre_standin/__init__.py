"""A STAND-IN for an OSS's `lctl` (NRS TBF and job_stats), for tests. It is not Lustre.

`StandInOss` writes the JSON state the `lctl` script in this folder reads, runs that script
the way an administrator would run lctl (for hand edits), and moves traffic through the
rules with a deliberately simple model so usage and "held at the limit" can be tested.
What the script models, and from which sources, is in its docstring and docs/lustre.md.
"""

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

LCTL = str(Path(__file__).with_name("lctl"))
SERVICE = "ost.OSS.ost_io"


class StandInOss:
    def __init__(self, directory: Path, partitions: int = 4, osts=("lustre-OST0000",), brw_size_mib: int = 4,
                 has_hp: bool = True):
        self.state_path = str(directory / "lctl-standin.json")
        # What the backend runs: the stand-in under this interpreter (a pyenv shim behind
        # "#!/usr/bin/env python3" costs ~0.1 s a call).
        self.lctl = str(directory / "lctl")
        Path(self.lctl).write_text(f'#!/bin/sh\nexec "{sys.executable}" "{LCTL}" "$@"\n')
        os.chmod(self.lctl, 0o755)
        self.brw_size = brw_size_mib << 20
        fifo = {"name": "fifo", "tbf_type": None}
        state = {
            "services": {SERVICE: {
                "partitions": partitions, "has_hp": has_hp,
                "policy": {"regular": dict(fifo), "high_priority": dict(fifo)},
                "rules": {q: {str(c): [] for c in range(partitions)} for q in ("regular", "high_priority")},
            }},
            "obdfilter": {ost: {"brw_size": brw_size_mib, "jobs": {}} for ost in osts},
        }
        self._save(state)

    @property
    def env(self) -> dict:
        return {"VNODE_LCTL_STANDIN_STATE": self.state_path}

    def state(self) -> dict:
        with open(self.state_path) as f:
            return json.load(f)

    def _save(self, state: dict) -> None:
        with open(self.state_path, "w") as f:
            json.dump(state, f, indent=1)

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        """Run the stand-in lctl as an administrator would (hand edits, bad commands)."""
        env = dict(os.environ, **self.env)
        return subprocess.run([self.lctl, *argv], capture_output=True, text=True, env=env)

    def rules(self, queue: str = "regular", cpt: int = 0) -> list[dict]:
        return self.state()["services"][SERVICE]["rules"][queue][str(cpt)]

    @contextlib.contextmanager
    def _locked(self):
        """The lock the stand-in lctl takes around each command: edits here and its commands do not mix."""
        with open(self.state_path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def drop_rule_in(self, name: str, cpt: int, queue: str = "regular") -> None:
        """Lose a rule in one partition only (what a start failing half-way leaves behind)."""
        with self._locked():
            state = self.state()
            rules = state["services"][SERVICE]["rules"][queue][str(cpt)]
            rules[:] = [r for r in rules if r["name"] != name]
            self._save(state)

    def serve(self, uid: int, job_id: str, offered_per_cpt: float, seconds: float, cpts=(0,), ost=None,
              write: bool = False) -> int:
        """Offer RPCs from one user to some partitions; each gets min(offered, its rule's rate).

        A toy model of a token bucket (no depth, no bursts): enough to see a cap bite. Served
        RPCs are full-size (brw_size) and are added to the OST's job_stats under `job_id`;
        the matching rule's `ref` becomes 1 in each partition used, as a TBF class would.
        """
        with self._locked():
            return self._serve(uid, job_id, offered_per_cpt, seconds, cpts, ost, write)

    def _serve(self, uid, job_id, offered_per_cpt, seconds, cpts, ost, write) -> int:
        state = self.state()
        service = state["services"][SERVICE]
        tbf_type = service["policy"]["regular"].get("tbf_type")
        served = 0
        # A bucket earns fractions of an RPC: what a short call could not serve is kept for the next.
        carry = state.setdefault("traffic_carry", {}).setdefault(job_id, {})
        for cpt in cpts:
            rules = service["rules"]["regular"][str(cpt)]
            rule = next((r for r in rules if r["name"] != "default" and _matches(r["shown"], tbf_type, uid, job_id)),
                        next((r for r in rules if r["name"] == "default"), None))
            rate = rule["rate"] if rule else float("inf")
            exact = min(offered_per_cpt, rate) * seconds + carry.get(str(cpt), 0.0)
            carry[str(cpt)] = exact - int(exact)
            served += int(exact)
            if rule is not None:
                rule["ref"] = max(rule["ref"], 1)
        ost = ost or next(iter(state["obdfilter"]))
        job = state["obdfilter"][ost]["jobs"].setdefault(job_id, {})
        counter = job.setdefault("write_bytes" if write else "read_bytes",
                                 {"samples": 0, "min": 0, "max": 0, "sum": 0, "sumsq": 0})
        if served:
            counter["samples"] += served
            counter["sum"] += served * self.brw_size
            counter["min"] = self.brw_size
            counter["max"] = self.brw_size
            counter["sumsq"] += served * self.brw_size ** 2
        job["snapshot_time"] = job.get("snapshot_time", 1_700_000_000) + int(seconds)
        self._save(state)
        return served


def _matches(shown: str, tbf_type: str | None, uid: int, job_id: str) -> bool:
    def field_matches(key: str, values: list[str]) -> bool:
        if key == "uid":
            return any(int(v, 0) == uid for v in values)
        if key == "jobid":   # '*' the one wildcard, else exact (nrs_tbf.c cfs_match_wildcard, NRS_TBF_MATCH_FULL)
            return any(re.fullmatch(".*".join(map(re.escape, v.split("*"))), job_id) for v in values)
        return False

    if tbf_type == "generic":
        for conjunction in shown.split(","):
            parts = [p.partition("=") for p in conjunction.split("&")]
            if all(field_matches(k, v.strip("{}").split()) for k, _, v in parts):
                return True
        return False
    return field_matches(tbf_type or "", shown.strip("{}").split())
