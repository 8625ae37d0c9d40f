"""A DataNode's network link: a network namespace joined to the host by a veth (testbed.compute_host),
shaped to a rate each way with tc's token bucket filter, so the network binds before the disks do.

    link = DataNodeLink("vslink-1a2b3c4d", rate_mbps=40).start()
    argv = [*link.enter(), "java", ...]   # the DataNode, inside; it listens on link.address
    link.stop()

Egress is what tbf shapes: the host side's carries the clients' writes to the DataNode, the
namespace side's the DataNode's reads to the clients.
"""

import subprocess

from testbed.compute_host import ComputeHost

MB = 1_000_000
# What tbf lets through at once: at least a few 64 KiB HDFS packets (and GSO segments), about 5 ms of the rate.
BURST_SECONDS, MIN_BURST_BYTES = 0.005, 256 * 1024
LATENCY_MS = 100   # how long a packet may wait in the bucket's queue before tbf drops it


class DataNodeLink(ComputeHost):
    def __init__(self, name: str, rate_mbps: float):
        super().__init__(name)
        self.rate_mbps = rate_mbps

    def start(self) -> "DataNodeLink":
        super().start()
        try:
            shape = ["qdisc", "add", "dev", "{dev}", "root", "tbf", "rate", f"{int(self.rate_mbps * MB * 8)}bit",
                     "burst", str(max(MIN_BURST_BYTES, int(self.rate_mbps * MB * BURST_SECONDS))),
                     "latency", f"{LATENCY_MS}ms"]
            subprocess.run(["tc", *[a.format(dev=self.host_if) for a in shape]], check=True, capture_output=True)
            subprocess.run(self.command(["tc", *[a.format(dev=self.ns_if) for a in shape]]), check=True,
                           capture_output=True)
        except BaseException:
            self.stop()
            raise
        return self

    def enter(self) -> list[str]:
        """The argv prefix that runs a command inside the namespace (keeping this host's /sys and /proc)."""
        return self.command([])
