"""Start the MPI-IO Test under mpirun and return its JSON result document."""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from testbed.processes import stop_process

# The suite's program, in benchmarks/mpi-io/ (a script run under mpirun; its imports are found
# through the venv's lab path, scripts/setup.sh).
PROGRAM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi-io", "mpiio_test.py")


@dataclass
class MpiioRun:
    """One mpirun of the benchmark; `options` are mpiio_test.py flags."""

    nprocs: int
    directory: str
    options: list[str] = field(default_factory=list)
    vnodes: list[str] = field(default_factory=list)   # one per rank, or empty
    vnode_root: str = ""
    timeout: float = 600.0

    def command(self) -> list[str]:
        # Root needs --allow-run-as-root; 8 ranks on 2 cores need --oversubscribe, and binding
        # would pin oversubscribed ranks to the same core.
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "--mca", "btl", "self,vader", "-n", str(self.nprocs),
               sys.executable, PROGRAM, "--dir", self.directory, *self.options]
        if self.vnodes:
            cmd += ["--vnodes", ",".join(self.vnodes), "--vnode-root", self.vnode_root]
        return cmd


class MpiioFailed(RuntimeError):
    pass


def run(job: MpiioRun) -> dict:
    proc = subprocess.Popen(job.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=job.timeout)
    except BaseException:
        # SIGTERM lets mpirun stop its ranks; a SIGKILLed mpirun leaves them running with
        # files open on the benchmark file system, which then cannot be unmounted.
        stop_process(proc)
        raise
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise MpiioFailed(f"mpirun exited {proc.returncode}: {(stderr + stdout).strip()[-2000:]}")
    return json.loads(lines[-1])


def phase(doc: dict, op: str) -> dict:
    return next(p for p in doc["phases"] if p["op"] == op)


def rank_rows(doc: dict, **labels) -> list[dict]:
    """One CSV row per rank and phase, prefixed with the experiment's labels."""
    rows = []
    for p in doc["phases"]:
        for r in p["ranks"]:
            rows.append({**labels, "op": p["op"], "rank": r["rank"], "vnode": r["vnode"],
                         "mbps": round(r["mbps"], 2), "bytes": r["bytes"], "seconds": round(r["seconds"], 3),
                         "aggregate_mbps": round(p["aggregate_mbps"], 2)})
    return rows
