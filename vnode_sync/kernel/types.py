"""Value types for what the kernel files hold; each parses and prints itself."""

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class DeviceNumber:
    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> "DeviceNumber":
        major, minor = text.split(":")
        return cls(int(major), int(minor))

    def __str__(self) -> str:
        return f"{self.major}:{self.minor}"


# Where a backend counts per device, the key of one that counts the node as a whole (the DataNode's
# throttler, which does not know a transfer's disk): no device has it. It is the wire's device "".
WHOLE_NODE = DeviceNumber(-1, -1)


@dataclass(frozen=True)
class DeviceLimits:
    """What one VNode gets on one device, as cgroup files and TBF rules hold it. 0 means none (for
    weight, the default).

    read_bps/write_bps/iops are ceilings (the wire's Share.ceiling_*); weight is BFQ's integer 1..1000
    (the local weights on the device, scaled, agents/storage/allocation.py)."""

    device: DeviceNumber
    read_bps: int = 0
    write_bps: int = 0
    read_iops: int = 0
    write_iops: int = 0
    weight: int = 0

    def is_unlimited(self) -> bool:
        return not (self.read_bps or self.write_bps or self.read_iops or self.write_iops or self.weight)


@dataclass(frozen=True)
class Share:
    """One VNode's share in one direction of a resource a backend shares as a whole (the DataNode):
    local weight (scale-free, 0: none), floor and ceiling in bytes/s (0: none). The wire's Share."""

    weight: float = 0.0
    floor_bps: int = 0
    ceiling_bps: int = 0


@dataclass(frozen=True)
class Shares:
    read: Share = Share()
    write: Share = Share()

    @classmethod
    def ceilings(cls, read_bps: int, write_bps: int) -> "Shares":
        return cls(Share(ceiling_bps=read_bps), Share(ceiling_bps=write_bps))


@dataclass(frozen=True)
class DeviceCapacity:
    """What a device is configured to deliver (the coordinator's BW of Algorithm 1), bytes/s."""

    device: DeviceNumber
    read_bps: int = 0
    write_bps: int = 0


@dataclass
class IoCounters:
    read_bytes: int = 0
    write_bytes: int = 0
    read_ios: int = 0
    write_ios: int = 0


@dataclass(frozen=True)
class BlkioLine:
    """One line of blkio.throttle.*_device: "MAJ:MIN VALUE"."""

    device: DeviceNumber
    value: int

    @classmethod
    def parse(cls, line: str) -> "BlkioLine":
        dev, value = line.split()
        return cls(DeviceNumber.parse(dev), int(value))

    def __str__(self) -> str:
        return f"{self.device} {self.value}"


@dataclass(frozen=True)
class IoMaxLine:
    """One line of cgroup v2 io.max: "MAJ:MIN rbps=N wbps=max riops=max wiops=max"."""

    device: DeviceNumber
    limits: dict = field(default_factory=dict)  # key -> int; absent or "max" = unlimited

    KEYS = ("rbps", "wbps", "riops", "wiops")

    @classmethod
    def parse(cls, line: str) -> "IoMaxLine":
        dev, *pairs = line.split()
        limits = {}
        for pair in pairs:
            key, value = pair.split("=")
            if value != "max":
                limits[key] = int(value)
        return cls(DeviceNumber.parse(dev), limits)

    def __str__(self) -> str:
        values = " ".join(f"{k}={self.limits.get(k) or 'max'}" for k in self.KEYS)
        return f"{self.device} {values}"


def parse_blkio_lines(text: str) -> dict[DeviceNumber, int]:
    return {line.device: line.value for line in map(BlkioLine.parse, filter(str.strip, text.splitlines()))}


def parse_io_service_bytes(text: str) -> dict[DeviceNumber, IoCounters]:
    """Parse blkio.throttle.io_service_bytes ("7:0 Read 1234" lines, plus a "Total" line)."""
    counters: dict[DeviceNumber, IoCounters] = {}
    for line in text.splitlines():
        parts = line.split()
        # Each device also has Sync, Async, Discard and Total lines; read every look (agents/storage), skipped unparsed.
        if len(parts) != 3 or parts[1] not in ("Read", "Write") or ":" not in parts[0]:
            continue
        c = counters.setdefault(DeviceNumber.parse(parts[0]), IoCounters())
        if parts[1] == "Read":
            c.read_bytes = int(parts[2])
        else:
            c.write_bytes = int(parts[2])
    return counters


def parse_io_stat(text: str) -> dict[DeviceNumber, IoCounters]:
    """Parse cgroup v2 io.stat ("7:0 rbytes=1 wbytes=2 rios=3 wios=4 ...")."""
    counters = {}
    for line in text.splitlines():
        dev, *pairs = line.split()
        fields = dict(p.split("=", 1) for p in pairs)
        counters[DeviceNumber.parse(dev)] = IoCounters(
            int(fields.get("rbytes", 0)), int(fields.get("wbytes", 0)),
            int(fields.get("rios", 0)), int(fields.get("wios", 0)))
    return counters
