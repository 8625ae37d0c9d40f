"""The control channel to the DataNode's Java agent: a Unix socket, one line per value, protocol 2.

    HELLO protocol=2             -> OK protocol=2 min_protocol=2 agent=... version=... hadoop=...
                                    started_ms=... java=<java.version> block_tokens=true|false
                                    hook.<Class.method>=woven|skipped|not_found|failed|pending ...
    APPLY generation=N ... END   -> OK generation=N | ERR <why>; nothing changes on ERR
        NODE read_capacity_bps= write_capacity_bps= devices=MAJ:MIN,...
        DEFAULT / USER name=<user> read_weight= write_weight= read_floor_bps= write_floor_bps=
                                   read_ceiling_bps= write_ceiling_bps=
        UID uid= name= / CONN ip= port= name=
    STATS                        -> NODE ..., DEFAULT <counters>, USER name= <counters>..., OK generation=N
    PING                         -> OK vnode-sync-datanode-throttle <version> started=<ms>
    WATCH threads                -> OK watching threads, then THREAD tid= [user=] / IDLE tid= lines as ops
                                    start and end (read by vnode_sync/datanode/cpu_shares.py, not here)

Every line is a KIND and key=value fields; both sides skip keys (and line kinds) they do not know,
so one new counter or setting does not break an older peer; a change that would is a new protocol,
refused in the handshake. Counters are bytes, wait (ns) and ops per direction since the DataNode
started; rates are bytes/s, 0 = none; a weight of 0 leaves a user to its ceiling only.
"""

import math
import re
import socket
from dataclasses import dataclass, field

from vnode_sync.errors import InvalidArgument, Unavailable, Unsupported
from vnode_sync.kernel.backend import VolumeQueue
from vnode_sync.kernel.types import DeviceNumber, Share, Shares  # noqa: F401 (re-exported: what APPLY carries)
from vnode_sync.validation import user_name as validate_user_name, vnode_name as validate_vnode_name

TIMEOUT_SECONDS = 5.0
PROTOCOL = 2
# A node's weights span at most this much in each direction: a smaller positive weight is written as
# the largest over it. A share a million times below the heaviest moves less than a byte a second per
# MB/s of the node (nothing anyone can tell from zero), while the dispatcher's tags, advanced by
# bytes / weight in doubles, keep their byte resolution for 2^32 times longer than at ~1e-16.
WEIGHT_RANGE = 2 ** 20
# What every op needs for its user's share to hold: who it is (readBlock / writeBlock) and where its
# packets pass (sendBlock / receiveBlock). A hook the Java agent names and this list does not is
# ignored (a newer agent may weave more).
REQUIRED_HOOKS = {
    "DataXceiver.readBlock": "reads are not charged to their user",
    "DataXceiver.writeBlock": "writes are not charged to their user",
    "BlockSender.sendBlock": "reads are not scheduled",
    "BlockReceiver.receiveBlock": "writes are not held to their ceilings",
    "ReplicaOutputStreams.writeDataToDisk": "writes are not dispatched by weight",
}
# Woven by the same agent but not needed for every node: without them the node still holds each
# user's share of the ops above (issue 27; docs/datanode-throttle.md).
OPTIONAL_HOOKS = {
    "DataXceiver.replaceBlock": "balancer and mover moves are not charged to system",
    "DataXceiver.copyBlock": "balancer and mover moves are not charged to system",
    "DataNode.requestShortCircuitFdsForRead": "short-circuit local reads are not governed",
    # Both or neither: without them a read's packets take its slots, and its read-ahead is not ordered.
    "ReadaheadPool.readaheadStream": "read-ahead is not ordered by weight (a returning reader waits behind it)",
    "ReadaheadRequestImpl.run": "read-ahead is not ordered by weight (a returning reader waits behind it)",
}
WOVEN = "woven"


def _share_fields(shares: Shares, least_weight: dict[str, float]) -> str:
    fields = []
    for direction in ("read", "write"):
        share = getattr(shares, direction)
        weight = max(share.weight, least_weight[direction]) if share.weight > 0 else share.weight
        fields += [f"{direction}_weight={_number(weight)}", f"{direction}_floor_bps={_number(share.floor_bps)}",
                   f"{direction}_ceiling_bps={_number(share.ceiling_bps)}"]
    return " ".join(fields)


@dataclass(frozen=True)
class NodeCapacity:
    """The DataNode as a whole: what its weights divide per direction (0: weights off), and its data
    disks, whose busy time tells the Java agent when the node delivers less than that."""

    read_bps: int = 0
    write_bps: int = 0
    devices: tuple[DeviceNumber, ...] = ()


@dataclass(frozen=True)
class ThrottleSettings:
    """Everything one APPLY replaces."""

    generation: int
    default: Shares
    users: dict[str, Shares] = field(default_factory=dict)
    uids: dict[int, str] = field(default_factory=dict)
    connections: dict[tuple[str, int], str] = field(default_factory=dict)
    node: NodeCapacity = NodeCapacity()

    def lines(self) -> list[str]:
        devices = ",".join(str(d) for d in self.node.devices)
        everyone = [self.default, *self.users.values()]
        least_weight = {d: max((getattr(s, d).weight for s in everyone), default=0.0) / WEIGHT_RANGE
                        for d in ("read", "write")}
        lines = [f"APPLY generation={self.generation}",
                 f"NODE read_capacity_bps={self.node.read_bps} write_capacity_bps={self.node.write_bps}"
                 + (f" devices={devices}" if devices else ""),
                 f"DEFAULT {_share_fields(self.default, least_weight)}"]
        for name, shares in sorted(self.users.items()):
            lines.append(f"USER name={validate_vnode_name(name)} {_share_fields(shares, least_weight)}")
        lines += [f"UID uid={uid} name={validate_user_name(name)}" for uid, name in sorted(self.uids.items())]
        lines += [f"CONN ip={ip} port={port} name={validate_vnode_name(name)}"
                  for (ip, port), name in sorted(self.connections.items())]
        return lines + ["END"]


@dataclass(frozen=True)
class AgentHello:
    """What the Java agent says of itself in the handshake."""

    protocol: int
    version: str
    hadoop: str
    started_ms: int
    hooks: dict[str, str]
    java: str = ""           # the DataNode JVM's java.version; "": not reported (an older agent)
    block_tokens: str = ""   # dfs.block.access.token.enable in the DataNode's Configuration; "": not reported

    def missing_hooks(self) -> dict[str, str]:
        """Required hooks that are not woven -> their state (skipped, not_found, failed, pending, absent)."""
        return {hook: self.hooks.get(hook, "absent") for hook in REQUIRED_HOOKS if self.hooks.get(hook) != WOVEN}


@dataclass(frozen=True)
class Counters:
    read_bytes: int = 0
    write_bytes: int = 0
    read_wait_ns: int = 0
    write_wait_ns: int = 0
    read_ops: int = 0
    write_ops: int = 0


@dataclass(frozen=True)
class Stats:
    started_ms: int
    generation: int
    default: Counters
    users: dict[str, Counters]
    node: dict[str, float] = field(default_factory=dict)   # the NODE line: configured capacities, volumes
    volumes: tuple[VolumeQueue, ...] = ()                  # the VOLUME lines: each dispatcher's queue


class ThrottleChannel:
    """A client of one DataNode's control socket; each call opens a short connection."""

    def __init__(self, path: str, timeout: float = TIMEOUT_SECONDS):
        self.path, self.timeout = path, timeout

    def _exchange(self, lines: list[str]) -> list[str]:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(self.path)
                s.sendall("".join(line + "\n" for line in lines).encode())
                reply = b""
                while not reply.endswith(b"\n") or not _last_line(reply).startswith((b"OK", b"ERR")):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
        except OSError as e:
            raise Unavailable(f"DataNode throttle socket {self.path}: {e.strerror or e}") from e
        answer = reply.decode(errors="replace").splitlines()
        if not answer:
            raise Unavailable(f"DataNode throttle socket {self.path}: closed without an answer")
        if answer[-1].startswith("ERR"):
            raise InvalidArgument(f"DataNode throttle refused: {answer[-1][4:]}")
        if not answer[-1].startswith("OK"):
            raise Unavailable(f"DataNode throttle socket {self.path}: unexpected answer {answer[-1][:80]!r}")
        return answer

    def ping(self) -> str:
        """The agent's name, version and start time; anything else on the socket is refused."""
        answer = self._exchange(["PING"])[-1]
        if not answer.startswith("OK vnode-sync-datanode-throttle "):
            raise Unavailable(f"DataNode throttle socket {self.path}: not vnode-sync's Java agent ({answer[:80]!r})")
        return answer[3:]

    def hello(self) -> AgentHello:
        """The handshake: Unsupported, in one line, unless the agent speaks this protocol."""
        try:
            answer = self._exchange([f"HELLO protocol={PROTOCOL}"])[-1]
        except InvalidArgument as e:
            raise Unsupported(f"the Java agent on {self.path} cannot speak protocol {PROTOCOL}: "
                              f"{str(e).removeprefix('DataNode throttle refused: ')}") from e
        fields = _fields(answer, "OK")
        if fields.get("agent") != "vnode-sync-datanode-throttle":
            raise Unavailable(f"DataNode throttle socket {self.path}: not vnode-sync's Java agent ({answer[:80]!r})")
        try:
            protocol = int(fields.get("protocol", "0"))
            started = int(fields.get("started_ms", "0"))
        except ValueError as e:
            raise Unavailable(f"DataNode throttle socket {self.path}: malformed HELLO answer: {e}") from e
        if protocol != PROTOCOL:
            raise Unsupported(f"the Java agent on {self.path} ({fields.get('version', '?')}) answered protocol "
                              f"{protocol}; this storage agent speaks {PROTOCOL}: install matching releases")
        hooks = {k.removeprefix("hook."): v for k, v in fields.items() if k.startswith("hook.")}
        return AgentHello(protocol, fields.get("version", "?"), fields.get("hadoop", "unknown"), started, hooks,
                          fields.get("java", ""), fields.get("block_tokens", ""))

    def apply(self, settings: ThrottleSettings) -> None:
        answer = self._exchange(settings.lines())[-1]
        if _fields(answer, "OK").get("generation") != str(settings.generation):
            raise Unavailable(f"DataNode throttle socket {self.path}: APPLY {settings.generation} answered {answer[:80]!r}")

    def stats(self) -> Stats:
        """Keys this side does not know are skipped; a known one must be a number, a user a user name."""
        lines = self._exchange(["STATS"])
        node, default, users = None, None, {}
        volumes: list[VolumeQueue] = []
        try:
            for line in lines[:-1]:
                kind = line.split(" ", 1)[0]
                fields = _fields(line, kind)
                if kind == "NODE":
                    node = {k: float(v) for k, v in fields.items()}
                elif kind == "VOLUME":
                    volumes.append(_volume(fields))
                elif kind == "DEFAULT":
                    default = _counters(fields)
                elif kind == "USER":
                    users[validate_vnode_name(fields.get("name", ""))] = _counters(fields)
            generation = int(_fields(lines[-1], "OK")["generation"])
            if node is None or default is None:
                raise ValueError("no NODE or DEFAULT line")
        except (ValueError, KeyError, InvalidArgument) as e:
            raise Unavailable(f"DataNode throttle socket {self.path}: malformed STATS: {e}") from e
        return Stats(int(node.get("started_ms", 0)), generation, default, users, node, tuple(volumes))


DIRECTIONS = ("read", "write")   # as STATS names them (NODE keys read_*, write_*)
# A volume's storage ID as HDFS writes it (DS-<uuid>), or "node": it becomes a metrics label value.
_VOLUME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _volume(fields: dict[str, str]) -> VolumeQueue:
    volume = fields.get("id", "")
    if not _VOLUME_ID.fullmatch(volume):
        raise ValueError(f"volume id {volume[:40]!r} is not a storage ID")
    queue = VolumeQueue(volume, int(fields["depth"]), float(fields["moved_bps"]), int(fields["waiting"]))
    if queue.depth < 1 or not 0 <= queue.moved_bytes_per_second < math.inf or queue.waiting < 0:
        raise ValueError(f"VOLUME {volume}: depth {queue.depth}, moved {queue.moved_bytes_per_second}, waiting "
                         f"{queue.waiting}: out of range")
    return queue


def _fields(line: str, kind: str) -> dict[str, str]:
    """key=value fields after KIND; anything not key=value is skipped, as an unknown key would be."""
    head, _, rest = line.partition(" ")
    if head != kind:
        raise ValueError(f"expected {kind}, got {line[:80]!r}")
    out = {}
    for part in rest.split():
        key, eq, value = part.partition("=")
        if eq:
            out[key] = value
    return out


def _counters(fields: dict[str, str]) -> Counters:
    values = {name: int(fields.get(name, "0")) for name in Counters.__dataclass_fields__}
    if any(n < 0 for n in values.values()):
        raise ValueError(f"negative counter in {values}")
    return Counters(**values)


def _number(value: float) -> str:
    """A decimal the Java side parses (Fields.REAL) with nine significant digits.

    Weights only divide among themselves, so a tiny one is as meaningful as a large one: fixed
    decimal places would write a standby weight of 1e-16 as "0", which means "not weighted" (the
    ceiling only), and a user meant to have a trickle would get nothing. Below 1e-4 the exponent
    form keeps its digits."""
    if value < 0 or value != value or value == float("inf"):
        raise InvalidArgument(f"a share must be a finite number >= 0, got {value}")
    if float(value).is_integer():
        return str(int(value))
    mantissa, _, exponent = f"{value:.9g}".partition("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent}" if exponent else mantissa


def _last_line(data: bytes) -> bytes:
    return data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
