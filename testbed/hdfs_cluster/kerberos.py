"""Secure HDFS on the testbed: a realm of the cluster's own (testbed/kdc.py), the daemons' and the
users' principals, keytabs and ticket caches, and the settings Hadoop needs for it.

What it turns on (architecture.md, "Production HDFS facts"):
- `hadoop.security.authentication=kerberos` and block access tokens;
- SASL on the data transfer protocol, `dfs.data.transfer.protection=privacy`, with the AES/CTR
  cipher suite (without it SASL's own cipher gives ~5 MB/s per user here); no privileged ports,
  so `ignore.secure.ports.for.testing=true` stands in for HTTPS (production: `dfs.http.policy=HTTPS_ONLY`);
- SPNEGO on every HTTP endpoint (WebHDFS, /jmx), as Hadoop requires under Kerberos;
- users are principals `alice@REALM`, mapped to `alice` by `hadoop.security.auth_to_local`; the
  services (`nn/localhost`, `dn/localhost`, `HTTP/localhost`, named explicitly: the DataNodes
  bind 127.0.0.1, so `_HOST` would give `dn/127.0.0.1`) map to `hdfs`.

Files, all under `<workdir>/kerberos`: `kdc/` (the KDC), `services.keytab` (root's, 0600), and
`users/<name>/{keytab,ccache}` owned by that user's uid, mode 0700: each user `kinit -kt`s into
a ticket cache of its own, and its clients find it by KRB5CCNAME.
"""

import os
import re
import shutil
import subprocess

from testbed.kdc import MitKdc, Owner, realm_for
from vnode_sync.errors import InvalidArgument, NotFound, Unavailable

SERVICE_HOST = "localhost"
SERVICES = ("nn", "dn", "HTTP")
ADMIN = "hdfs"  # the principal of clients the testbed runs as root (probe, fsck)
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
PROTECTIONS = ("authentication", "integrity", "privacy")


class HdfsKerberos:
    """The realm of one secure cluster; `start()` makes the KDC, the services and the admin principal."""

    def __init__(self, workdir: str, realm: str | None = None, protection: str = "privacy",
                 cipher_suites: str = "AES/CTR/NoPadding", port: int | None = None):
        if protection not in PROTECTIONS:
            raise InvalidArgument(f"data transfer protection {protection!r} is not one of {', '.join(PROTECTIONS)}")
        self.directory = os.path.join(workdir, "kerberos")
        self.realm = realm or realm_for(os.path.basename(workdir.rstrip("/")))
        self.protection, self.cipher_suites = protection, cipher_suites
        self.kdc = MitKdc(os.path.join(self.directory, "kdc"), self.realm, port)

    @property
    def services_keytab(self) -> str:
        return os.path.join(self.directory, "services.keytab")

    def service(self, name: str) -> str:
        return self.kdc.principal(f"{name}/{SERVICE_HOST}")

    def _user_dir(self, user: str) -> str:
        return os.path.join(self.directory, "users", user)

    def ccache(self, user: str) -> str:
        """The ticket cache of `user`'s principal; NotFound if the testbed made none."""
        path = os.path.join(self._user_dir(user), "ccache")
        if not os.path.exists(path):
            raise NotFound(f"no Kerberos principal {user}@{self.realm} on this cluster; add_user({user!r}, ...) first")
        return path

    def start(self) -> "HdfsKerberos":
        os.makedirs(os.path.join(self.directory, "users"), mode=0o755)
        os.chmod(self.directory, 0o755)
        self.kdc.start()
        for service in SERVICES:
            self.kdc.add_principal(f"{service}/{SERVICE_HOST}", self.services_keytab)
        self.add_user(ADMIN, Owner(os.getuid(), os.getgid()))
        return self

    def add_user(self, user: str, owner: Owner) -> str:
        """Principal `user@REALM`, its keytab and a ticket (`kinit -kt`, as the user) in its own cache."""
        if not _USER.fullmatch(user):
            raise InvalidArgument(f"user name {user!r}: lower-case letters, digits, '_' or '-', at most 32")
        directory = self._user_dir(user)
        os.makedirs(directory, mode=0o700)
        os.chown(directory, owner.uid, owner.gid)
        keytab = self.kdc.add_principal(user, os.path.join(directory, "keytab"), owner)
        self.kdc.kinit(user, keytab, os.path.join(directory, "ccache"), owner)
        return os.path.join(directory, "ccache")

    def client_env(self, user: str) -> dict[str, str]:
        """What a client of `user` needs beside the JVM flag: its ticket cache (and the realm for tools)."""
        return {"KRB5CCNAME": f"FILE:{self.ccache(user)}", "KRB5_CONFIG": self.kdc.krb5_conf}

    def jvm_flags(self) -> list[str]:
        return self.kdc.jvm_flags()

    def auth_to_local(self) -> str:
        realm = re.escape(self.realm)
        services = [f"RULE:[2:$1@$0]({name}@{realm})s/.*/{ADMIN}/" for name in SERVICES]
        return "\n".join([*services, f"RULE:[1:$1@$0](.*@{realm})s/@.*//", "DEFAULT"])

    def site(self) -> tuple[dict, dict]:
        """(core-site, hdfs-site) properties of every daemon and client of the secure cluster."""
        keytab, http = self.services_keytab, self.service("HTTP")
        core = {"hadoop.security.authentication": "kerberos",
                "hadoop.security.authorization": "true",
                "hadoop.security.auth_to_local": self.auth_to_local(),
                "hadoop.http.filter.initializers": "org.apache.hadoop.security.AuthenticationFilterInitializer",
                "hadoop.http.authentication.type": "kerberos",
                "hadoop.http.authentication.simple.anonymous.allowed": "false",
                "hadoop.http.authentication.kerberos.principal": http,
                "hadoop.http.authentication.kerberos.keytab": keytab}
        hdfs = {"dfs.block.access.token.enable": "true",
                "dfs.namenode.kerberos.principal": self.service("nn"),
                "dfs.namenode.keytab.file": keytab,
                "dfs.namenode.kerberos.internal.spnego.principal": http,
                "dfs.datanode.kerberos.principal": self.service("dn"),
                "dfs.datanode.keytab.file": keytab,
                "dfs.web.authentication.kerberos.principal": http,
                "dfs.web.authentication.kerberos.keytab": keytab,
                "dfs.data.transfer.protection": self.protection,
                "dfs.encrypt.data.transfer.cipher.suites": self.cipher_suites,
                "dfs.http.policy": "HTTP_ONLY",
                "ignore.secure.ports.for.testing": "true"}
        return core, hdfs

    def curl(self, url: str, user: str = ADMIN, timeout: float = 5) -> str:
        """GET `url` with SPNEGO as `user` (curl --negotiate); the host must be SERVICE_HOST."""
        result = subprocess.run(["curl", "-sS", "-f", "-4", "--negotiate", "-u", ":", "--max-time", str(timeout), url],
                                env=dict(os.environ, **self.client_env(user)), capture_output=True, text=True)
        if result.returncode != 0:
            raise Unavailable(f"curl --negotiate {url} failed (exit {result.returncode}): "
                              f"{result.stderr.strip()[:300]}")
        return result.stdout

    def to_json(self) -> dict:
        return {"realm": self.realm, "port": self.kdc.port, "protection": self.protection,
                "cipher_suites": self.cipher_suites, "krb5_conf": self.kdc.krb5_conf}

    @classmethod
    def from_json(cls, workdir: str, entry: dict) -> "HdfsKerberos":
        return cls(workdir, entry["realm"], entry["protection"], entry["cipher_suites"], entry["port"])

    def stop(self) -> None:
        self.kdc.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
