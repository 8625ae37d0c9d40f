"""A "compute host" on this machine: a network namespace joined to the host by a veth pair.

Clients started inside it have their own /proc/net, so the storage side cannot see
their sockets' owners: identity must come from the compute agent, as between real
hosts. Addresses are private (10.231.x.y/30) and exist only between the namespace and
this host; the namespace and the veth are named from `name` and removed on exit.

    with ComputeHost("vnode-sync-test.abc") as host:
        host.run(["python", "-c", "..."])       # runs inside the namespace
        host.host_address, host.address         # host side, namespace side
"""

import hashlib
import subprocess
from dataclasses import dataclass


def _ip(*args: str, netns: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", netns] if netns else []
    subprocess.run(prefix + ["ip", *args], check=True, capture_output=True, text=True)


def _used_addresses() -> str:
    return subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout


@dataclass
class ComputeHost:
    name: str

    def __post_init__(self):
        digest = hashlib.sha256(self.name.encode()).hexdigest()
        self.netns = self.name
        self.host_if, self.ns_if = f"vs{digest[:8]}h", f"vs{digest[:8]}c"
        base = int(digest[8:12], 16) % (1 << 14)  # a /30 inside 10.231.0.0/16
        self.host_address = f"10.231.{base >> 6}.{(base & 63) * 4 + 1}"
        self.address = f"10.231.{base >> 6}.{(base & 63) * 4 + 2}"

    def start(self) -> "ComputeHost":
        if f" {self.host_address}/" in _used_addresses():
            raise RuntimeError(f"address {self.host_address} is in use; is another run using {self.name}?")
        _ip("netns", "add", self.netns)
        try:
            _ip("link", "set", "lo", "up", netns=self.netns)
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.netns)
            _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("addr", "add", f"{self.address}/30", "dev", self.ns_if, netns=self.netns)
            _ip("link", "set", self.ns_if, "up", netns=self.netns)
        except BaseException:
            self.stop()
            raise
        return self

    def command(self, argv: list[str], uid: int | None = None, gid: int | None = None) -> list[str]:
        """argv run inside the namespace, as `uid`/`gid` if given. nsenter, unlike `ip netns exec`,
        keeps this host's /sys (and so its cgroups) visible; the uid drop comes after entering."""
        prefix = ["nsenter", f"--net=/run/netns/{self.netns}", "--"]
        if uid is not None:
            prefix += ["setpriv", f"--reuid={uid}", f"--regid={gid if gid is not None else uid}",
                       "--clear-groups", "--"]
        return prefix + list(argv)

    def popen(self, argv: list[str], uid: int | None = None, gid: int | None = None, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.command(argv, uid, gid), **kwargs)

    def run(self, argv: list[str], uid: int | None = None, gid: int | None = None,
            **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(argv, uid, gid), **kwargs)

    def stop(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)

    def __enter__(self) -> "ComputeHost":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
