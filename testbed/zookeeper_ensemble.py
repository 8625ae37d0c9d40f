"""A real ZooKeeper ensemble (Debian's `zookeeper` package) on loopback, for the coordinator's HA
tests and benchmarks.

Each server runs QuorumPeerMain with its own config, data dir and three free loopback ports
(client, quorum, election) under one work dir named with the run name, so testbed.leftovers finds
a crashed run's JVMs (their command lines carry the config path) and files. Servers can be stopped,
killed and started again one at a time; everything is stopped and removed on exit.

    with ZooKeeperEnsemble(unique_name("zk")) as zk:
        client = KazooClient(hosts=zk.hosts)
        zk.stop_server(0); zk.start_server(0)
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass

from testbed.lifecycle import StartedService
from testbed.ports import free_port
from testbed.processes import stop_process

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"   # its manifest names the jars it needs
LOGGING_JAR = "/usr/share/java/slf4j-simple.jar"  # the package has only slf4j's API: logs would be lost
# The Netty server (for TLS) needs these too; zookeeper.jar's manifest does not name them.
NETTY_JARS = ("/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar")
WHY_NO_ZOOKEEPER = (None if os.path.exists(ZOOKEEPER_JAR) and shutil.which("java") else
                    "needs ZooKeeper and Java (Debian's zookeeper package; scripts/setup.d/zookeeper.sh)")
TICK_MS = 500   # sessions may then be as short as 2 ticks (1 s) and at most 20 ticks (10 s)


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """A four-letter admin command's answer ('' if the server does not answer)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One server of the ensemble: its id, ports, directory and process."""

    def __init__(self, workdir: str, server_id: int, tls: "EnsembleTls | None" = None, jaas: str = ""):
        self.server_id = server_id
        self.directory = os.path.join(workdir, f"server-{server_id}")
        self.client_port, self.quorum_port, self.election_port = free_port(), free_port(), free_port()
        self.secure_port = free_port() if tls else 0
        self.tls = tls
        self.jaas = jaas   # a JAAS file: clients must authenticate by SASL (DIGEST-MD5) as one of its users
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def secure_address(self) -> str:
        return f"127.0.0.1:{self.secure_port}"

    @property
    def config_path(self) -> str:
        return os.path.join(self.directory, "zoo.cfg")

    def write_config(self, peers: list["ZooKeeperServer"]) -> None:
        data = os.path.join(self.directory, "data")
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "myid"), "w") as f:
            f.write(f"{self.server_id}\n")
        lines = [f"tickTime={TICK_MS}", "initLimit=20", "syncLimit=10", f"dataDir={data}",
                 f"clientPort={self.client_port}", "clientPortAddress=127.0.0.1",
                 "maxSessionTimeout=20000", "admin.enableServer=false",
                 "4lw.commands.whitelist=srvr,ruok,mntr,cons", "autopurge.purgeInterval=0",
                 *(f"server.{p.server_id}=127.0.0.1:{p.quorum_port}:{p.election_port}" for p in peers)]
        if self.jaas:
            lines += ["authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                      "enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
        if self.tls:   # client connections (only) also on a TLS port that requires a client certificate
            lines += [f"secureClientPort={self.secure_port}", "secureClientPortAddress=127.0.0.1",
                      "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                      f"ssl.keyStore.location={self.tls.server_pem}", "ssl.keyStore.type=PEM",
                      f"ssl.trustStore.location={self.tls.ca}", "ssl.trustStore.type=PEM", "ssl.clientAuth=need"]
        with open(self.config_path, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self) -> None:
        log = open(os.path.join(self.directory, "server.log"), "ab")
        self.process = subprocess.Popen(
            ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             *([f"-Djava.security.auth.login.config={self.jaas}"] if self.jaas else []),
             f"-Dzookeeper.log.dir={self.directory}", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-cp", ":".join((ZOOKEEPER_JAR, LOGGING_JAR, *NETTY_JARS)),
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", self.config_path],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()

    def mode(self) -> str:
        """leader, follower, standalone, or '' while it does not serve."""
        for line in four_letter_word(self.client_port, "srvr").splitlines():
            if line.startswith("Mode: "):
                return line.split(": ", 1)[1].strip()
        return ""

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 5) -> str:
        try:
            with open(os.path.join(self.directory, "server.log"), errors="replace") as f:
                return " | ".join(f.read().strip().splitlines()[-lines:])
        except OSError:
            return ""


@dataclass(frozen=True)
class EnsembleTls:
    """A CA of its own, the servers' certificate (SAN IP 127.0.0.1) and a client certificate, as PEM."""

    ca: str
    server_pem: str   # key and certificate in one file, as ZooKeeper's PEM key store reads them
    client_cert: str
    client_key: str

    @classmethod
    def make(cls, directory: str) -> "EnsembleTls":
        from vnode_sync.security import certs
        certs.create_ca(directory, "zookeeper test CA")
        server = certs.issue(directory, "node", "zookeeper", hosts=("127.0.0.1",))
        client = certs.issue(directory, "node", "zookeeper-client")
        server_pem = os.path.join(directory, "server.pem")
        with open(server_pem, "w") as out, open(server.key) as key, open(server.cert) as cert:
            out.write(key.read() + cert.read())
        return cls(os.path.join(directory, "ca.crt"), server_pem, client.cert, client.key)


class ZooKeeperEnsemble(StartedService):
    """`tls`: each server also serves clients on a TLS port (`secure_hosts`) requiring a client certificate.
    `sasl_users` (name -> password): every client must authenticate by SASL DIGEST-MD5 as one of them."""

    def __init__(self, name: str, size: int = 3, tls: bool = False, sasl_users: dict[str, str] | None = None):
        self.name = name
        self.workdir = tempfile.mkdtemp(prefix=f"{name}.zookeeper.")
        self.tls = EnsembleTls.make(os.path.join(self.workdir, "tls")) if tls else None
        jaas = ""
        if sasl_users:
            jaas = os.path.join(self.workdir, "jaas.conf")
            with open(jaas, "w") as f:
                f.write("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                        + "".join(f'  user_{user}="{password}"\n' for user, password in sasl_users.items())
                        + "  ;\n};\n")
        self.servers = [ZooKeeperServer(self.workdir, i + 1, self.tls, jaas) for i in range(size)]

    @property
    def hosts(self) -> str:
        """The connection string a client gives (every server)."""
        return ",".join(s.address for s in self.servers)

    @property
    def secure_hosts(self) -> str:
        return ",".join(s.secure_address for s in self.servers)

    def start(self, timeout: float = 60) -> "ZooKeeperEnsemble":
        for server in self.servers:
            server.write_config(self.servers)
        for server in self.servers:
            server.start()
        self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 60, servers: list[ZooKeeperServer] | None = None) -> None:
        """Until every running server (or those given) serves as leader or follower."""
        deadline = time.monotonic() + timeout
        while True:
            waiting = [s for s in (servers or self.servers) if s.running() and s.mode() not in ("leader", "follower")]
            dead = [s for s in (servers or []) if not s.running()]
            if dead:
                raise RuntimeError(f"zookeeper server {dead[0].server_id} exited: {dead[0].log_tail()}")
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"zookeeper servers {[s.server_id for s in waiting]} not serving after "
                                   f"{timeout}s: {waiting[0].log_tail()}")
            time.sleep(0.2)

    def leader(self) -> ZooKeeperServer | None:
        return next((s for s in self.servers if s.running() and s.mode() == "leader"), None)

    def stop_server(self, index: int, sig: int = signal.SIGTERM) -> None:
        server = self.servers[index]
        if server.process is not None:
            stop_process(server.process, sig)

    def start_server(self, index: int, timeout: float = 60) -> None:
        server = self.servers[index]
        server.start()
        self.wait_serving(timeout, [server])

    def stop(self) -> None:
        for server in self.servers:
            if server.process is not None:
                stop_process(server.process)
        shutil.rmtree(self.workdir, ignore_errors=True)


def main() -> None:
    """Start an ensemble and print its connection string until interrupted (a manual check)."""
    from testbed.names import unique_name
    with ZooKeeperEnsemble(unique_name("zk")) as ensemble:
        print(ensemble.hosts, [s.mode() for s in ensemble.servers], flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
