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
        return self._exchange(["PING"])[-1][3:]

    def apply(self, settings: ThrottleSettings) -> None:
        self._exchange(settings.lines())

    def stats(self) -> Stats:
        lines = self._exchange(["STATS"])
        started, default, users = 0, Counters(), {}
        try:
            for line in lines[:-1]:
                fields = line.split()
                if fields[0] == "STARTED":
                    started = int(fields[1])
                elif fields[0] == "DEFAULT":
                    default = Counters(*map(int, fields[1:7]))
                elif fields[0] == "USER":
                    users[fields[1]] = Counters(*map(int, fields[2:8]))
            generation = int(lines[-1].split()[1])
        except (IndexError, ValueError) as e:
            raise Unavailable(f"DataNode throttle socket {self.path}: malformed STATS ({e})") from e
        return Stats(started, generation, default, users)


def _last_line(data: bytes) -> bytes:
    return data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
