"""A real one-node Slurm cluster on localhost: munged, slurmctld and slurmd from Debian's packages.

Everything lives in one work dir named after `name` (munge key and socket, slurm.conf,
state, spool, logs); the daemons run in the foreground as children, so `stop()` ends
exactly the processes it started and removes the dir.

    with LocalSlurm("vnode-sync-test.slurm.1234", prolog="/x/slurm-prolog") as slurm:
        job = slurm.sbatch("alice", "sleep 5")
        slurm.wait_for_state(job, "RUNNING", timeout=20)
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from testbed.lifecycle import StartedService
from testbed.ports import free_port
from testbed.processes import stop_process

DAEMONS = ("munged", "slurmctld", "slurmd")
DEBIAN_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")


def missing_programs() -> list[str]:
    """The Slurm and munge programs this host lacks (install DEBIAN_PACKAGES)."""
    return [p for p in (*DAEMONS, "sbatch", "scontrol", "squeue", "runuser") if not shutil.which(p)]


@dataclass
class SlurmSettings:
    """What the generated slurm.conf says beyond the fixed localhost layout."""

    prolog: str | None = None
    epilog: str | None = None
    # Alloc runs the prolog when the job is allocated rather than at its first step; both
    # batch and srun jobs then see the share before their first I/O.
    prolog_flags: str = "Alloc"
    # Slurm kills a prolog that runs longer than this (seconds) and drains the node.
    prolog_epilog_timeout: int = 60
    cpus: int = 8          # more than the host has (config_overrides), so jobs run side by side
    extra_lines: list[str] = field(default_factory=list)


class SlurmDaemons(StartedService):
    """Daemons of one run as children, in one work dir with its own munge key and socket and slurm.conf;
    `stop()` ends them, last started first, and removes the dir."""

    def __init__(self, name: str, workdir: str | None = None):
        self.name = name
        self.workdir = workdir or tempfile.mkdtemp(prefix=name + ".")
        self.processes: dict[str, subprocess.Popen] = {}

    def path(self, *parts: str) -> str:
        return os.path.join(self.workdir, *parts)

    @property
    def conf(self) -> str:
        return self.path("slurm.conf")

    @property
    def munge_socket(self) -> str:
        return self.path("munge", "munge.socket")

    @property
    def env(self) -> dict[str, str]:
        """Environment for Slurm client commands (sbatch, squeue, scontrol, sacctmgr)."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin:/usr/sbin:/sbin"), "SLURM_CONF": self.conf}

    def _spawn(self, daemon: str, argv: list[str], **popen) -> None:
        log = open(self.path(f"{daemon}.out"), "ab")
        self.processes[daemon] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, start_new_session=True, **popen)
        log.close()

    def _start_munged(self) -> None:
        # Job users' sbatch must reach the munge socket, so the dir is traversable by all.
        os.chmod(self.workdir, 0o755)
        os.makedirs(self.path("munge"), exist_ok=True)
        os.chmod(self.path("munge"), 0o755)
        key = self.path("munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", ["munged", "-F", f"--key-file={key}", f"--socket={self.munge_socket}",
                               f"--pid-file={self.path('munge', 'munged.pid')}",
                               f"--seed-file={self.path('munge', 'munged.seed')}"])
        self.wait_for(lambda: os.path.exists(self.munge_socket), 10, "munged's socket")

    def stop(self) -> None:
        for process in reversed(self.processes.values()):
            stop_process(process)
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def command(self, argv: list[str], user: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
        if user:
            argv = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", *argv]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout, cwd="/")

    def log_tail(self, daemon: str, lines: int = 30) -> str:
        try:
            with open(self.path(f"{daemon}.log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def wait_for(self, predicate, timeout: float, what: str, interval: float = 0.2):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for daemon, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{daemon} exited with {process.returncode} while waiting for {what}; "
                                       f"log: {self.log_tail(daemon) or self.path(daemon + '.out')}")
            value = predicate()
            if value:
                return value
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what} (work dir {self.workdir})")


class LocalSlurm(SlurmDaemons):
    def __init__(self, name: str, settings: SlurmSettings | None = None, workdir: str | None = None):
        super().__init__(name, workdir)
        self.settings = settings or SlurmSettings()
        self.node = socket.gethostname().split(".")[0]
        self.partition = "vnode"

    # ---- configs -------------------------------------------------------------

    def _write_conf(self, ctld_port: int, slurmd_port: int) -> None:
        s = self.settings
        lines = [
            f"ClusterName=vnodesync{os.getpid()}",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={ctld_port}", f"SlurmdPort={slurmd_port}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={self.path('state')}", f"SlurmdSpoolDir={self.path('spool')}",
            f"SlurmctldPidFile={self.path('slurmctld.pid')}", f"SlurmdPidFile={self.path('slurmd.pid')}",
            f"SlurmctldLogFile={self.path('slurmctld.log')}", f"SlurmdLogFile={self.path('slurmd.log')}",
            "SlurmctldDebug=info", "SlurmdDebug=info",
            # No cgroup plugin: linuxproc tracks by process tree, so nothing touches /sys/fs/cgroup.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SlurmdParameters=config_overrides", "MpiDefault=none", "ReturnToService=2",
            "SchedulerParameters=sched_interval=1", "MinJobAge=300",
            f"PrologEpilogTimeout={s.prolog_epilog_timeout}",
        ]
        if s.prolog:
            lines.append(f"Prolog={s.prolog}")
        if s.epilog:
            lines.append(f"Epilog={s.epilog}")
        if s.prolog_flags:
            lines.append(f"PrologFlags={s.prolog_flags}")
        lines += s.extra_lines
        lines += [f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={s.cpus} State=UNKNOWN",
                  f"PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    # ---- daemons ------------------------------------------------------------

    def start(self) -> "LocalSlurm":
        if os.geteuid() != 0:
            raise PermissionError("slurmd must run as root to start jobs as other users")
        missing = missing_programs()
        if missing:
            raise FileNotFoundError(f"missing {', '.join(missing)}; apt-get install {' '.join(DEBIAN_PACKAGES)}")
        for sub in ("state", "spool"):
            os.makedirs(self.path(sub), exist_ok=True)
        self._start_munged()
        self._write_conf(free_port(), free_port())
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self.wait_for(lambda: self.scontrol("ping").returncode == 0 and "UP" in self.scontrol("ping").stdout,
                      30, "slurmctld to answer ping")
        self._spawn("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", self.node])
        self.wait_for(lambda: self.node_state().startswith("IDLE"), 30, f"node {self.node} to be IDLE")
        return self

    def stop(self) -> None:
        if self.processes.get("slurmctld") and self.processes["slurmctld"].poll() is None:
            self.scontrol("shutdown", timeout=10)   # lets slurmd run the remaining epilogs
        super().stop()

    # ---- client commands -----------------------------------------------------

    def scontrol(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return self.command(["scontrol", *args], timeout=timeout)

    def sbatch(self, user: str, script: str, *options: str) -> str:
        """Submit `script` (shell text) as `user`; returns the job id."""
        result = self.command(["sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--ntasks=1",
                               *options, "--wrap", script], user=user)
        if result.returncode != 0:
            raise RuntimeError(f"sbatch as {user} failed: {result.stderr.strip()}")
        return result.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o` as a mapping of its Key=Value fields."""
        result = self.scontrol("show", "job", "-o", job_id)
        if result.returncode != 0:
            return {}
        fields = {}
        for token in result.stdout.split():
            key, sep, value = token.partition("=")
            if sep:
                fields[key] = value
        return fields

    def job_state(self, job_id: str) -> str:
        return self.job(job_id).get("JobState", "")

    def node_state(self) -> str:
        result = self.command(["sinfo", "--noheader", "--Node", "--format=%T", "--nodes", self.node])
        return result.stdout.strip().upper()

    def wait_for_state(self, job_id: str, states: str | tuple[str, ...], timeout: float) -> str:
        wanted = (states,) if isinstance(states, str) else states
        return self.wait_for(lambda: (s := self.job_state(job_id)) in wanted and s, timeout,
                             f"job {job_id} to reach {'/'.join(wanted)}")
