"""What the testbed knows of its daemons and transfers; each saved in and read from cluster.json."""

import json
from dataclasses import asdict, dataclass

from vnode_sync.kernel.types import DeviceNumber


@dataclass(frozen=True)
class Transfer:
    """What one client read or wrote, as the client measured it (JVM start excluded)."""

    bytes: int
    seconds: float
    bytes_per_second: float
    phases: dict[str, float] | None = None   # writes: seconds to create, to hand over the bytes, to close

    @classmethod
    def parse(cls, output: str) -> "Transfer":
        return cls(**json.loads(output.strip().splitlines()[-1]))


@dataclass(frozen=True)
class DataNodePorts:
    data: int  # dfs.datanode.address: block reads and writes (DataXceiver)
    http: int
    ipc: int


@dataclass
class DataNode:
    id: str
    data_dir: str
    mountpoint: str
    backing_file: str
    loop_device: str
    device_number: DeviceNumber
    ports: DataNodePorts
    log: str
    pid: int | None = None
    host: str = "127.0.0.1"  # the address it listens on and the NameNode hands to clients
    more_data_dirs: tuple[str, ...] = ()      # further volumes, each on a disk of its own
    more_loop_devices: tuple[str, ...] = ()   # their disks, in the same order

    @property
    def data_dirs(self) -> tuple[str, ...]:
        return (self.data_dir, *self.more_data_dirs)

    @property
    def loop_devices(self) -> tuple[str, ...]:
        return (self.loop_device, *self.more_loop_devices)

    @property
    def xfer_address(self) -> str:
        return f"{self.host}:{self.ports.data}"

    def to_json(self) -> dict:
        entry = asdict(self)
        entry.update(device_number=str(self.device_number), major=self.device_number.major,
                     minor=self.device_number.minor)
        return entry

    @classmethod
    def from_json(cls, entry: dict) -> "DataNode":
        fields = {k: v for k, v in entry.items() if k not in ("major", "minor")}
        fields["device_number"] = DeviceNumber.parse(entry["device_number"])
        fields["ports"] = DataNodePorts(**entry["ports"])
        for name in ("more_data_dirs", "more_loop_devices"):
            fields[name] = tuple(entry.get(name, ()))
        return cls(**fields)


@dataclass
class NameNode:
    rpc_port: int
    http_port: int
    name_dir: str
    log: str
    audit_log: str
    pid: int | None = None
    host: str = "127.0.0.1"

    @property
    def rpc_address(self) -> str:
        return f"hdfs://{self.host}:{self.rpc_port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.http_port}"

    def to_json(self) -> dict:
        return {**asdict(self), "rpc_address": self.rpc_address, "http_address": self.http_address}

    @classmethod
    def from_json(cls, entry: dict) -> "NameNode":
        return cls(**{k: v for k, v in entry.items() if k not in ("rpc_address", "http_address")})
