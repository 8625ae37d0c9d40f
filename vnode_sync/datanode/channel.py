"""The control channel to the DataNode's Java agent: a Unix socket, one line per value.

    PING                         -> OK vnode-sync-datanode-throttle <version> started=<ms>
    APPLY <generation> ... END   -> OK <generation> | ERR <why>; nothing changes on ERR
        DEFAULT <read_bps> <write_bps> / USER <name> <read_bps> <write_bps>
        UID <uid> <name> / CONN <client ip> <client port> <name>
    STATS                        -> STARTED <ms>, DEFAULT <6 counters>, USER <name> <6 counters>..., OK <generation>

Counters are read bytes, write bytes, read and write wait (ns), read and write ops, since
the DataNode started. Rates are bytes/s, 0 = unlimited.
"""

import socket
from dataclasses import dataclass, field

from vnode_sync.errors import InvalidArgument, Unavailable
from vnode_sync.validation import user_name as validate_user_name

TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Rates:
    """One user's (or the default's) read and write rate, bytes/s; 0 is unlimited."""

    read_bps: int = 0
    write_bps: int = 0


@dataclass(frozen=True)
class ThrottleSettings:
    """Everything one APPLY replaces."""

    generation: int
    default: Rates
    users: dict[str, Rates] = field(default_factory=dict)
    uids: dict[int, str] = field(default_factory=dict)
    connections: dict[tuple[str, int], str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        lines = [f"APPLY {self.generation}", f"DEFAULT {self.default.read_bps} {self.default.write_bps}"]
        for name, rates in sorted(self.users.items()):
            lines.append(f"USER {validate_user_name(name)} {rates.read_bps} {rates.write_bps}")
        lines += [f"UID {uid} {validate_user_name(name)}" for uid, name in sorted(self.uids.items())]
        lines += [f"CONN {ip} {port} {validate_user_name(name)}" for (ip, port), name in sorted(self.connections.items())]
        return lines + ["END"]


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

    def apply(self, settings: ThrottleSettings) -> None:
        answer = self._exchange(settings.lines())[-1]
        if answer != f"OK {settings.generation}":
            raise Unavailable(f"DataNode throttle socket {self.path}: APPLY {settings.generation} answered {answer[:80]!r}")

    def stats(self) -> Stats:
        """Every line must be one the contract names with its exact number of fields."""
        lines = self._exchange(["STATS"])
        started, default, users = None, None, {}
        try:
            for line in lines[:-1]:
                kind, *values = line.split()
                if kind == "STARTED" and len(values) == 1:
                    started = int(values[0])
                elif kind == "DEFAULT" and len(values) == 6:
                    default = _counters(values)
                elif kind == "USER" and len(values) == 7:
                    users[validate_user_name(values[0])] = _counters(values[1:])
                else:
                    raise ValueError(f"unexpected line {line[:80]!r}")
            kind, generation = lines[-1].split()
            generation = int(generation)
            if started is None or default is None:
                raise ValueError("no STARTED or DEFAULT line")
        except (ValueError, InvalidArgument) as e:
            raise Unavailable(f"DataNode throttle socket {self.path}: malformed STATS: {e}") from e
        return Stats(started, generation, default, users)


def _counters(values: list[str]) -> Counters:
    numbers = [int(v) for v in values]
    if any(n < 0 for n in numbers):
        raise ValueError(f"negative counter in {' '.join(values)}")
    return Counters(*numbers)


def _last_line(data: bytes) -> bytes:
    return data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
