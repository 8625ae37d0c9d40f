"""A real Slurm accounting store on localhost: munged, MariaDB and slurmdbd from Debian's packages,
which is all `sacctmgr` needs (it talks to slurmdbd alone; no slurmctld runs).

One work dir named after `name` holds the munge key and socket, MariaDB's datadir, socket and log,
slurm.conf (AccountingStorageType=accounting_storage/slurmdbd, for the clients) and slurmdbd.conf;
MariaDB and slurmdbd listen on free loopback ports. The daemons run in the foreground as children,
so `stop()` ends exactly the processes it started and removes the dir (testbed.leftovers finds a
crashed run's by the work dir in their command lines).

    with LocalSlurmdbd("vnode-sync-test.slurmdbd.1234") as dbd:
        dbd.sacctmgr("add", "account", "physics", "fairshare=40")
        print(dbd.sacctmgr("show", "associations", "--parsable2").stdout)
"""

import os
import pwd
import shutil
import socket
import subprocess

from testbed.ports import free_ports
from testbed.slurm import SlurmDaemons

DEBIAN_PACKAGES = ("slurmdbd", "slurm-client", "munge", "mariadb-server-core", "mariadb-client-core")
PROGRAMS = ("munged", "mariadb-install-db", "my_print_defaults", "mariadbd", "slurmdbd", "sacctmgr")
DATABASE = "slurm_acct_db"


def missing_programs() -> list[str]:
    """The programs this host lacks (install DEBIAN_PACKAGES: scripts/setup.d/slurm.sh does)."""
    return [p for p in PROGRAMS if not shutil.which(p)]


class LocalSlurmdbd(SlurmDaemons):
    def __init__(self, name: str, cluster: str = "vnodesync", workdir: str | None = None):
        super().__init__(name, workdir)
        self.cluster = cluster     # the one cluster of this run's own database
        self.user = pwd.getpwuid(os.geteuid()).pw_name    # MariaDB's and slurmdbd's, and Slurm's admin

    def start(self) -> "LocalSlurmdbd":
        missing = missing_programs()
        if missing:
            raise FileNotFoundError(f"missing {', '.join(missing)}; apt-get install {' '.join(DEBIAN_PACKAGES)}")
        self._start_munged()
        mariadb_port, dbd_port = free_ports(2)
        self._start_mariadb(mariadb_port)
        self._write_confs(mariadb_port, dbd_port)
        # slurmdbd takes no config path: it reads slurmdbd.conf beside $SLURM_CONF. Its argv[0] names the
        # work dir so that a crashed run's slurmdbd is found by testbed.leftovers like the other daemons.
        self._spawn("slurmdbd", [self.path("slurmdbd"), "-D"], executable=shutil.which("slurmdbd"), env=self.env)
        # The first start creates the accounting tables; sacctmgr answers once slurmdbd serves.
        self.wait_for(lambda: self.sacctmgr("show", "cluster").returncode == 0, 60, "slurmdbd to answer sacctmgr")
        self.sacctmgr_ok("add", "cluster", self.cluster)
        return self

    def _start_mariadb(self, port: int) -> None:
        datadir = self.path("mariadb")
        # --no-defaults everywhere: the host's /etc/mysql is not this run's. root@127.0.0.1 without a password
        # (auth method normal) is slurmdbd's StorageUser; nothing but loopback can reach the port.
        installed = subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", f"--user={self.user}",
             "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"],
            capture_output=True, text=True, timeout=120)
        if installed.returncode != 0:
            raise RuntimeError(f"mariadb-install-db exited {installed.returncode}: {installed.stderr[-2000:]}")
        # A throwaway database: no fsync per commit, no doublewrite, no binary log (seconds off each start).
        self._spawn("mariadbd", [
            "mariadbd", "--no-defaults", f"--datadir={datadir}", f"--user={self.user}",
            f"--socket={self.path('mariadb.sock')}", f"--pid-file={self.path('mariadb.pid')}",
            f"--log-error={self.path('mariadbd.log')}", "--bind-address=127.0.0.1", f"--port={port}",
            "--skip-name-resolve", "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0",
            # the values slurmdbd checks for (it logs an error line otherwise)
            "--innodb-buffer-pool-size=128M", "--innodb-lock-wait-timeout=900"])
        self.wait_for(lambda: _listens(port), 60, "mariadbd to listen")

    def _write_confs(self, mariadb_port: int, dbd_port: int) -> None:
        auth = ["AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}"]
        _write(self.conf, [
            f"ClusterName={self.cluster}", "SlurmctldHost=localhost(127.0.0.1)", *auth,
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
            # For slurmdbd, sacctmgr takes the munge socket from here, not from AuthInfo.
            f"AccountingStoragePort={dbd_port}", f"AccountingStoragePass={self.munge_socket}"])
        dbd_conf = self.path("slurmdbd.conf")
        _write(dbd_conf, [
            *auth, "DbdHost=localhost", "DbdAddr=127.0.0.1", f"DbdPort={dbd_port}", f"SlurmUser={self.user}",
            f"PidFile={self.path('slurmdbd.pid')}", f"LogFile={self.path('slurmdbd.log')}", "DebugLevel=info",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={mariadb_port}",
            "StorageUser=root", f"StorageLoc={DATABASE}"])
        os.chmod(dbd_conf, 0o600)    # slurmdbd refuses a config others can read: it may hold StoragePass

    def sacctmgr(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """`sacctmgr --immediate args`: changes are committed without asking."""
        return self.command(["sacctmgr", "--immediate", *args], timeout=timeout)

    def sacctmgr_ok(self, *args: str) -> str:
        done = self.sacctmgr(*args)
        if done.returncode != 0:
            raise RuntimeError(f"sacctmgr {' '.join(args)} exited {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip()}; slurmdbd log: {self.log_tail('slurmdbd')}")
        return done.stdout


def _listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _write(path: str, lines: list[str]) -> None:
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
