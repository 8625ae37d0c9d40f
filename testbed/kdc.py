"""A real MIT Kerberos KDC (Debian's krb5-kdc) for one test run, all of it under one directory.

    kdc = MitKdc("/tmp/run/kdc", realm_for("vnode-sync-test.hdfs.4711.ab12")).start()
    keytab = kdc.add_principal("alice", "/tmp/run/alice.keytab", owner=(uid, gid))
    kdc.kinit("alice", keytab, "/tmp/run/alice.ccache", owner=(uid, gid))
    ...
    kdc.stop()        # or take_down(directory) from another process

The realm, database, stash, krb5.conf, kdc.conf, log and pid file live in the directory; the KDC
listens on a free port of 127.0.0.1 (TCP and UDP) and is found again by its pid file's path (which
carries the directory) on its command line, so a crashed run's KDC is found by testbed.leftovers.
Nothing outside the directory changes: /etc/krb5.conf and the packages' own KDC are not used,
every tool gets KRB5_CONFIG and KRB5_KDC_PROFILE, every JVM -Djava.security.krb5.conf.
Keys are aes256-cts-hmac-sha1-96 only: Java 17 refuses the weaker types MIT would also issue.
"""

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

import psutil

from testbed.ports import free_port
from testbed.processes import stop_process, stop_processes
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable

ENCTYPE = "aes256-cts-hmac-sha1-96"
# A principal's first component: a user name as vnode-sync accepts it, or a service (nn, dn, HTTP).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,31}(/[A-Za-z0-9.-]{1,253})?")
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


def realm_for(run_name: str) -> str:
    """A realm of the run's own: its name upper-cased, so principals carry the run's unique prefix."""
    realm = re.sub(r"[^A-Z0-9.-]", "-", run_name.upper()).strip(".-")
    if not realm:
        raise InvalidArgument(f"run name {run_name!r} gives no realm")
    return realm


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if not shutil.which(tool)]


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int


class MitKdc:
    """One realm's KDC; `start()` returns once it answers on its port."""

    def __init__(self, directory: str, realm: str, port: int | None = None):
        self.directory = os.path.abspath(directory)
        self.realm = realm
        self.port = port
        self._process: subprocess.Popen | None = None

    @property
    def krb5_conf(self) -> str:
        return os.path.join(self.directory, "krb5.conf")

    @property
    def kdc_conf(self) -> str:
        return os.path.join(self.directory, "kdc.conf")

    @property
    def log(self) -> str:
        return os.path.join(self.directory, "kdc.log")

    @property
    def pid_file(self) -> str:
        return os.path.join(self.directory, "krb5kdc.pid")

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of any Kerberos tool or JVM of this realm (never the host's /etc/krb5.conf)."""
        return dict(os.environ, KRB5_CONFIG=self.krb5_conf, KRB5_KDC_PROFILE=self.kdc_conf, **extra)

    def jvm_flags(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    def principal(self, name: str) -> str:
        if not _NAME.fullmatch(name):
            raise InvalidArgument(f"principal name {name!r}: a user or service name, e.g. alice or nn/localhost")
        return f"{name}@{self.realm}"

    def _write_confs(self) -> None:
        enc = ENCTYPE
        krb5 = f"""[libdefaults]
  default_realm = {self.realm}
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  default_tkt_enctypes = {enc}
  default_tgs_enctypes = {enc}
  permitted_enctypes = {enc}
  forwardable = true

[realms]
  {self.realm} = {{
    kdc = 127.0.0.1:{self.port}
  }}

[domain_realm]
  localhost = {self.realm}
  127.0.0.1 = {self.realm}
"""
        kdc = f"""[kdcdefaults]
  kdc_ports = {self.port}
  kdc_tcp_ports = {self.port}

[realms]
  {self.realm} = {{
    database_name = {self.directory}/principal
    key_stash_file = {self.directory}/stash
    acl_file = {self.directory}/kadm5.acl
    master_key_type = {enc}
    supported_enctypes = {enc}:normal
    max_life = 10h
    max_renewable_life = 1d
  }}

[logging]
  kdc = FILE:{self.log}
  admin_server = FILE:{self.directory}/kadmin.log
  default = FILE:{self.directory}/krb5lib.log
"""
        acl = os.path.join(self.directory, "kadm5.acl")
        for path, text in ((self.krb5_conf, krb5), (self.kdc_conf, kdc), (acl, "")):
            with open(path, "w") as f:
                f.write(text)
        # Clients run as other uids and need the realm's krb5.conf; nothing else here is theirs.
        os.chmod(self.directory, 0o711)
        os.chmod(self.krb5_conf, 0o644)

    def _run(self, argv: list[str], what: str, owner: Owner | None = None, **env: str) -> None:
        ids = {"user": owner.uid, "group": owner.gid, "extra_groups": []} if owner else {}
        result = subprocess.run(argv, env=self.env(**env), capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                timeout=60, cwd="/", **ids)
        if result.returncode != 0:
            why = (result.stderr or result.stdout).strip()[:500]
            raise Unavailable(f"{what} failed (exit {result.returncode}): {why}")

    def start(self, timeout: float = 20) -> "MitKdc":
        missing = missing_tools()
        if missing:
            raise NotFound(f"no {', '.join(missing)}; run scripts/setup.d/hdfs.sh "
                           "(krb5-kdc, krb5-admin-server, krb5-user)")
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        self.port = self.port or free_port()
        self._write_confs()
        # The master key only guards this throwaway database; it is stashed, never typed.
        self._run(["kdb5_util", "-r", self.realm, "create", "-s", "-P", secrets.token_hex(16)], "kdb5_util create")
        with open(self.log, "ab") as out:
            self._process = subprocess.Popen(["krb5kdc", "-n", "-r", self.realm, "-P", self.pid_file],
                                             env=self.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                             start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise Unavailable(f"krb5kdc exited with {self._process.returncode}; see {self.log}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return self
            if time.monotonic() > deadline:
                raise Unavailable(f"krb5kdc does not answer on 127.0.0.1:{self.port} after {timeout}s")
            time.sleep(0.05)

    def add_principal(self, name: str, keytab: str, owner: Owner | None = None) -> str:
        """Make `name@REALM` with a random key and export it to `keytab` (appended; mode 0600, OWNER's)."""
        principal = self.principal(name)
        self._run(["kadmin.local", "-r", self.realm, "-q", f"addprinc -randkey {principal}"], f"addprinc {principal}")
        self._run(["kadmin.local", "-r", self.realm, "-q", f"ktadd -k {keytab} -norandkey {principal}"],
                  f"ktadd {principal}")
        os.chmod(keytab, 0o600)
        if owner:
            os.chown(keytab, owner.uid, owner.gid)
        return keytab

    def kinit(self, name: str, keytab: str, ccache: str, owner: Owner | None = None) -> None:
        """A ticket for `name@REALM` from its keytab into the file cache `ccache`, as OWNER (it must read
        the keytab and write the cache's directory): what a user's `kinit -kt` does."""
        self._run(["kinit", "-kt", keytab, self.principal(name)], f"kinit {self.principal(name)}", owner,
                  KRB5CCNAME=f"FILE:{ccache}")

    def stop(self) -> None:
        if self._process is not None:
            stop_process(self._process, grace_seconds=5)
            self._process = None
        take_down(self.directory)


def kdc_processes(directory: str) -> list[psutil.Process]:
    """The krb5kdc processes whose pid file is in `directory` (what `start` runs)."""
    pid_file = os.path.join(os.path.abspath(directory), "krb5kdc.pid")
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if process.info["name"] == "krb5kdc" and pid_file in (process.info["cmdline"] or ()):
                found.append(process)
    return found


def take_down(directory: str) -> list[str]:
    """Stop the KDC of `directory`, even one another process started, and remove the directory;
    returns what it found."""
    processes = kdc_processes(directory)
    stop_processes(processes)
    found = [f"krb5kdc {p.pid}" for p in processes] + ([f"KDC dir {directory}"] if os.path.isdir(directory) else [])
    shutil.rmtree(directory, ignore_errors=True)
    return found
