"""Listening ports for the testbed's daemons, picked where no outgoing connection can take them first.

A port from bind(("", 0)) lies in the kernel's ephemeral range. Between our closing it and a
daemon binding it (seconds, for a JVM), any outgoing connection on the host may be handed the
same port: a DataNode's heartbeat, a client, the KDC's reply. CI lost a DataNode that way
("BindException: Address already in use"). Ports below the ephemeral range are never given to
outgoing connections, so only another listener can race us, and those pick at random here too.
"""

import random
import socket

LOWEST_PORT = 10000
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
_RESERVED = "/proc/sys/net/ipv4/ip_local_reserved_ports"

_handed_out: set[int] = set()  # a daemon may not have bound its port yet: never give it twice


def _ephemeral_low() -> int:
    try:
        with open(_EPHEMERAL_RANGE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _reserved() -> set[int]:
    """ip_local_reserved_ports, e.g. "8080,9000-9010" (ports an admin keeps for services)."""
    try:
        with open(_RESERVED) as f:
            text = f.read().strip()
    except OSError:
        return set()
    ports: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        ports.update(range(int(low), int(high or low) + 1))
    return ports


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))  # the wildcard: taken if any address of the host holds the port
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that nothing listens on, none handed out before by this process."""
    candidates = range(LOWEST_PORT, _ephemeral_low())
    excluded = _reserved() | _handed_out
    chosen: list[int] = []
    for _ in range(50 * count + 1000):
        if len(chosen) == count:
            break
        port = random.choice(candidates)
        if port not in excluded and port not in chosen and _is_free(port):
            chosen.append(port)
    if len(chosen) < count:
        raise OSError(f"found only {len(chosen)} of {count} free ports in {candidates.start}..{candidates.stop - 1}")
    _handed_out.update(chosen)
    return chosen


def free_port() -> int:
    return free_ports(1)[0]
