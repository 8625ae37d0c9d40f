"""Validation of values that cross a trust boundary: user names, priorities, node ids.

User names end up in cgroup paths and in lctl rule names, so only POSIX portable
user names are accepted (IEEE Std 1003.1 3.437, as useradd enforces by default).
"""

import ipaddress
import re

from vnode_sync.errors import InvalidArgument

PRIORITY_MIN = 1
PRIORITY_MAX = 100
USER_NAME_MAX = 32  # useradd's limit on Linux
UID_MAX = 2**32 - 2  # (uid_t)-1 means "no uid" to the kernel
# No device or node serves more than 1 TB/s; a larger figure is a typo (or an overflow waiting to happen).
RATE_MAX_BPS = 10**12

USER_NAME_ALLOWED = (f"1-{USER_NAME_MAX} characters from a-z, 0-9, '_', '-', starting with a letter or '_' "
                     "(a POSIX user name)")
NODE_ID_ALLOWED = "1-63 characters from A-Z, a-z, 0-9, '.', '_', '-'"
UID_ALLOWED = f"a whole number from 1 to {UID_MAX} (not root)"

_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]*\$?")
_GROUP_NAME = re.compile(r"[a-z_][a-z0-9_-]*")   # a user name without the trailing '$' of machine accounts
_NODE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def user_name(value: str) -> str:
    if not isinstance(value, str) or len(value) > USER_NAME_MAX or not _USER_NAME.fullmatch(value):
        shown = value if len(str(value)) <= 40 else str(value)[:40] + "..."
        raise InvalidArgument(f"invalid user name {shown!r}: use {USER_NAME_ALLOWED}")
    return value


GROUP_WEIGHT_MIN = 1
GROUP_WEIGHT_MAX = 10_000   # cgroup v2 io.weight's range: only ratios among siblings matter


def group_name(value: str) -> str:
    """A group (project, account, Unix group): named as a user is, for the same reasons (it reaches
    logs, metrics labels and, with nested edges, cgroup paths)."""
    if not isinstance(value, str) or len(value) > USER_NAME_MAX or not _GROUP_NAME.fullmatch(value):
        shown = value if len(str(value)) <= 40 else str(value)[:40] + "..."
        raise InvalidArgument(f"invalid group name {shown!r}: use 1-{USER_NAME_MAX} characters from a-z, 0-9, '_', '-', "
                              "starting with a letter or '_'")
    return value


def group_weight(value) -> int:
    """Accept an int or a decimal string from GROUP_WEIGHT_MIN to GROUP_WEIGHT_MAX."""
    allowed = f"must be an integer from {GROUP_WEIGHT_MIN} to {GROUP_WEIGHT_MAX}"
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not GROUP_WEIGHT_MIN <= value <= GROUP_WEIGHT_MAX:
        raise InvalidArgument(f"invalid group weight {value!r}: {allowed}")
    return value


def priority(value) -> int:
    """Accept an int or a decimal string; reject anything outside 1..100."""
    if isinstance(value, bool):
        raise InvalidArgument(f"invalid priority {value!r}: must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")
    if isinstance(value, str):
        if not re.fullmatch(r"\s*[0-9]+\s*", value):
            raise InvalidArgument(f"invalid priority {value!r}: must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")
        value = int(value)
    if not isinstance(value, int) or not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidArgument(f"invalid priority {value!r}: must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")
    return value


def uid(value) -> int:
    """Root (0) is refused: root-owned threads include the file system's own, never one user's."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= UID_MAX:
        raise InvalidArgument(f"invalid uid {value!r}: must be {UID_ALLOWED}")
    return value


def node_id(value: str) -> str:
    if not isinstance(value, str) or not _NODE_ID.fullmatch(value):
        raise InvalidArgument(f"invalid node id {value!r}: use {NODE_ID_ALLOWED}")
    return value


# A batch job as Slurm and PBS name it: Slurm `123` or an array task `123_4`; PBS `123.server`,
# `123[4].server` or `123[].server`. Nothing else: a job id reaches VNode names, so cgroup paths.
_JOB_ID = re.compile(r"[0-9]{1,20}(?:_[0-9]{1,10}|\[[0-9]{0,10}\])?(?:\.[A-Za-z0-9-]{1,63}){0,8}")
JOB_ID_ALLOWED = "a Slurm job id (123, 123_4) or a PBS one (123.server, 123[4].server), at most 64 characters"
JOB_VNODE_SEPARATOR = "."   # in no user name: `alice.123` is user alice's job 123, never a user
_JOB_VNODE = re.compile(r"([a-z_][a-z0-9_-]*\$?)\.([0-9]{1,20}(?:_[0-9]{1,10}|-[0-9]{0,10})?(?:\.[a-z0-9-]{1,63}){0,8})")


def job_id(value: str) -> str:
    """A batch job's id, before it names a VNode."""
    if not isinstance(value, str) or len(value) > 64 or not _JOB_ID.fullmatch(value):
        shown = value if len(str(value)) <= 40 else str(value)[:40] + "..."
        raise InvalidArgument(f"invalid job id {shown!r}: use {JOB_ID_ALLOWED}")
    return value


def job_vnode_name(user: str, job: str) -> str:
    """The VNode of user `user`'s job `job`: `user.job`, a PBS array's `[4]` spelt `-4` and host names
    lower-cased. One-to-one: Slurm ids have no '-' and PBS ids no '_', and user names no '.'."""
    token = job_id(job).replace("[", "-").replace("]", "").lower()
    return f"{user_name(user)}{JOB_VNODE_SEPARATOR}{token}"


def vnode_name(value: str) -> str:
    """A VNode: a user's (its user name) or a job's (`user.job`)."""
    if isinstance(value, str) and JOB_VNODE_SEPARATOR in value:
        match = _JOB_VNODE.fullmatch(value)
        if match is None or len(match.group(1)) > USER_NAME_MAX or len(value) > USER_NAME_MAX + 65:
            shown = value if len(value) <= 100 else value[:100] + "..."
            raise InvalidArgument(f"invalid VNode name {shown!r}: a user name, or a user name, '.' and a job id "
                                  f"({JOB_ID_ALLOWED}, lower-case, '[n]' as '-n')")
        return value
    return user_name(value)


def user_of_job_vnode(value: str) -> str:
    """The user a VNode belongs to (itself, for a user's VNode)."""
    return vnode_name(value).split(JOB_VNODE_SEPARATOR, 1)[0]


BANDWIDTH_ALLOWED = f"a whole number of bytes/s from 0 to {RATE_MAX_BPS} (1 TB/s)"


_LABEL = re.compile(r"[!-~]*")   # printable ASCII, no space: it is written into audit and log lines
LABEL_MAX = 128


def label(value: str, what: str, required: bool = True) -> str:
    """A job id, batch account or queue name: 1-128 printable ASCII characters, no whitespace."""
    if not isinstance(value, str) or len(value) > LABEL_MAX or not _LABEL.fullmatch(value) \
            or (required and not value):
        shown = value if len(str(value)) <= 40 else str(value)[:40] + "..."
        raise InvalidArgument(f"invalid {what} {shown!r}: use {'1' if required else '0'}-{LABEL_MAX} printable "
                              "ASCII characters without spaces")
    return value


def bandwidth(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= RATE_MAX_BPS:
        raise InvalidArgument(f"invalid {what} {value!r}: must be {BANDWIDTH_ALLOWED}")
    return value


_RATE_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*?)(?:/s)?\s*$")


def rate(value: str, what: str = "rate") -> int:
    """'15MB/s', '1.5GiB/s', '800KB', '0' or 'none' (no floor or ceiling) -> bytes/s."""
    text = str(value).strip().lower()
    if text in ("none", "0"):
        return 0
    match = _RATE.match(text)
    if not match or match.group(2) not in _RATE_UNITS:
        raise InvalidArgument(f"invalid {what} {value!r}: use bytes/s like 15MB/s, 800KB/s, 1GiB/s, or none")
    bps = int(float(match.group(1)) * _RATE_UNITS[match.group(2)])
    if bps > RATE_MAX_BPS:
        raise InvalidArgument(f"invalid {what} {value!r}: above 1TB/s, more than any node serves")
    return bps


def ip_address(value: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 becomes dotted IPv4, IPv6 is compressed."""
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        raise InvalidArgument(f"invalid IP address {value!r}: must be an IPv4 or IPv6 literal") from None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def endpoint(value: str) -> tuple[str, int | None]:
    """A storage endpoint: "10.0.0.5:9866", "[fd00::5]:9866", or an address alone (every port).
    Returns (normalised address, port or None)."""
    text = str(value)
    host, port = text, None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else (rest or None)
    elif text.count(":") == 1:
        host, port = text.split(":")
    if port is not None and (not port.isdigit() or not 0 < int(port) < 65536):
        raise InvalidArgument(f"invalid endpoint {text!r}: the port must be 1..65535 (address:port, "
                              "[IPv6]:port, or an address alone for every port)")
    try:
        return ip_address(host), int(port) if port is not None else None
    except InvalidArgument:
        raise InvalidArgument(f"invalid endpoint {text!r}: need an IP address (address:port, [IPv6]:port, "
                              "or an address alone for every port)") from None
