"""TCP sockets with their owner uid and inode, and which socket a thread is working on now.

/proc/<pid>/net/tcp and tcp6 list every TCP socket of the process's network namespace
(`Documentation/networking/proc_net_tcp.rst`): addresses in hex, 32-bit words in host
byte order, the owner's uid and the socket inode. Reading them walks the whole
established hash (5-13 ms a table on this VM), so on the live /proc the same rows come
from a sock_diag dump filtered by port in the kernel (about 1 ms for both families).
Java sockets are dual-stack, so IPv4 peers appear in tcp6 as ::ffff:a.b.c.d; addresses
here are normalised to dotted IPv4 so both tables, and compute agents' reports, agree.

File descriptors belong to the process, not the thread, so /proc/<pid>/task/<tid>/fd
cannot tell which of a process's sockets a handler thread serves. What the thread is
doing can: /proc/<pid>/task/<tid>/syscall shows the system call it is blocked in and
its arguments. Socket I/O names the socket fd directly (sendfile's first argument is the
socket); a thread waiting in epoll names the epoll fd, whose fdinfo lists the fds it
watches (Hadoop waits in a selector of its own per call); poll names an array in the
thread's memory, read through /proc/<pid>/mem. A thread that is running, or blocked
on something else, gives no evidence at that instant.
"""

import ipaddress
import os
import platform
import re
import socket
import struct
import sys
from dataclasses import dataclass

from vnode_sync import validation
from vnode_sync.kernel.procfs import list_dir, read_link, read_text

Endpoint = tuple[str, int]

TCP_ESTABLISHED = 0x01
TCP_LISTEN = 0x0A

# System calls whose first argument is the socket the thread is using (accept's: the listener).
_FD_FIRST_CALLS = {
    "x86_64": {0, 1, 17, 18, 19, 20, 40, 43, 44, 45, 46, 47, 48, 288, 299, 307},
    "aarch64": {63, 64, 65, 66, 67, 68, 71, 202, 206, 207, 210, 211, 212, 242, 243, 269},
}
_EPOLL_WAIT_CALLS = {"x86_64": {232, 281, 441}, "aarch64": {22, 441}}
_POLL_CALLS = {"x86_64": {7, 271}, "aarch64": {73}}
_MAX_POLL_FDS = 64
_SOCKET_LINK = re.compile(r"socket:\[(\d+)\]")
_MACHINE = platform.machine()


@dataclass(frozen=True)
class TcpSocket:
    """One row of /proc/net/tcp{,6}."""

    local: Endpoint
    remote: Endpoint
    state: int
    uid: int
    inode: int
    ipv6: bool = False  # from the IPv6 table or family (IPv4 peers of dual-stack sockets included)

    @property
    def established(self) -> bool:
        return self.state == TCP_ESTABLISHED


def normalise_address(address: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 becomes dotted IPv4, IPv6 is compressed."""
    return validation.ip_address(address)


def _decode_address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if sys.byteorder == "little":  # each 32-bit word is printed in host order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return normalise_address(str(ipaddress.ip_address(raw)))


def _decode_endpoint(field: str) -> Endpoint:
    address, port = field.split(":")
    return _decode_address(address), int(port, 16)


def parse_tcp_table(text: str, port: int | None = None, ipv6: bool = False) -> list[TcpSocket]:
    """Rows of a /proc/net/tcp or tcp6 file; with `port`, only sockets with that port at either end."""
    marker = f":{port:04X} " if port is not None else None
    sockets = []
    for line in text.splitlines()[1:]:
        if marker is not None and marker not in line:
            continue  # cheap filter before decoding: busy hosts list thousands of sockets
        fields = line.split()
        if len(fields) < 10:
            continue
        sockets.append(TcpSocket(_decode_endpoint(fields[1]), _decode_endpoint(fields[2]),
                                 int(fields[3], 16), int(fields[7]), int(fields[9]), ipv6))
    return sockets


NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
_NLM_F_DUMP_REQUEST = 0x301  # NLM_F_REQUEST | NLM_F_ROOT | NLM_F_MATCH
_DIAG_REQUEST = struct.Struct("=BBBBI")       # family, protocol, ext, pad, states
_DIAG_SOCKID = struct.Struct("!HH16s16s")     # sport, dport, src, dst (network order)
_DIAG_MSG_TAIL = struct.Struct("=IIIII")      # expires, rqueue, wqueue, uid, inode
_ALL_STATES = 0xFFF
_INET_DIAG_REQ_BYTECODE = 1
_INET_DIAG_BC_JMP, _INET_DIAG_BC_S_EQ, _INET_DIAG_BC_D_EQ = 1, 11, 12


def _diag_address(family: int, raw: bytes) -> str:
    packed = raw[:4] if family == socket.AF_INET else raw
    return normalise_address(str(ipaddress.ip_address(packed)))


def _either_port_filter(port: int) -> bytes:
    """inet_diag bytecode: accept when the source or the destination port is `port`.

    Each op is (code, yes, no): a jump of `yes` bytes when true, `no` when false; landing
    exactly on the end accepts, beyond it rejects. The kernel's audit wants every `no`
    target on the chain of `yes` jumps, hence the JMP (net/ipv4/inet_diag.c).
    """
    port_value = struct.pack("=BBH", 0, 0, port)
    program = (struct.pack("=BBH", _INET_DIAG_BC_S_EQ, 8, 12) + port_value
               + struct.pack("=BBH", _INET_DIAG_BC_JMP, 4, 12)
               + struct.pack("=BBH", _INET_DIAG_BC_D_EQ, 8, 12) + port_value)
    return struct.pack("=HH", 4 + len(program), _INET_DIAG_REQ_BYTECODE) + program


def diag_tcp_sockets(family: int, port: int | None = None) -> list[TcpSocket]:
    """TCP sockets of our own network namespace through sock_diag (what `ss` uses).

    Reading /proc/net/tcp walks every bucket of the established hash in a seq_file
    (about 5 ms per table on this 2-core VM, 262144 buckets); the kernel's dump walks
    it in one pass and filters by port itself, so it is the fast path for capture.
    """
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    try:
        request = (_DIAG_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES)
                   + _DIAG_SOCKID.pack(0, 0, bytes(16), bytes(16)) + struct.pack("=IQ", 0, (1 << 64) - 1))
        if port is not None:
            request += _either_port_filter(port)
        sock.sendto(struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, _NLM_F_DUMP_REQUEST, 1, 0)
                    + request, (0, 0))
        found = []
        while True:
            data = sock.recv(1 << 17)
            offset = 0
            while offset + 16 <= len(data):
                length, msg_type = struct.unpack_from("=IH", data, offset)
                if msg_type == 3:  # NLMSG_DONE
                    return found
                if msg_type == 2:  # NLMSG_ERROR
                    error = -struct.unpack_from("=i", data, offset + 16)[0]
                    raise OSError(error, f"sock_diag dump failed: {os.strerror(error)}")
                body = offset + 16
                fam, state = data[body], data[body + 1]
                sp, dp, src, dst = _DIAG_SOCKID.unpack_from(data, body + 4)
                _, _, _, uid, inode = _DIAG_MSG_TAIL.unpack_from(data, body + 4 + 48)
                found.append(TcpSocket((_diag_address(fam, src), sp), (_diag_address(fam, dst), dp),
                                       state, uid, inode, fam == socket.AF_INET6))
                offset += (length + 3) & ~3
            if not data:
                return found
    finally:
        sock.close()


def _same_network_namespace(proc_root: str, pid: int | str) -> bool:
    try:
        return os.stat(os.path.join(proc_root, str(pid), "ns", "net")).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def tcp_sockets(proc_root: str, pid: int | str, port: int | None = None) -> list[TcpSocket]:
    """The TCP sockets of `pid`'s network namespace (with `port`: having it at either end).

    sock_diag when `pid` shares our namespace and a port is given, else /proc/<pid>/net/tcp{,6}.
    """
    if port is not None and proc_root.rstrip("/") == "/proc" and _same_network_namespace(proc_root, pid):
        try:
            return [s for family in (socket.AF_INET, socket.AF_INET6) for s in diag_tcp_sockets(family, port)]
        except OSError:
            pass  # no sock_diag (module missing, seccomp): the tables still work, slower
    sockets: list[TcpSocket] = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        text = read_text(os.path.join(proc_root, str(pid), "net", table))
        if text is not None:
            sockets.extend(parse_tcp_table(text, port, ipv6=family == socket.AF_INET6))
    return sockets


def peer_of(sockets: list[TcpSocket], server_side: TcpSocket) -> TcpSocket | None:
    """The other end of a connection when both ends are on this host (same namespace)."""
    for s in sockets:
        if s.local == server_side.remote and s.remote == server_side.local:
            return s
    return None


def socket_inode(proc_root: str, pid: int, fd: int) -> int | None:
    target = read_link(os.path.join(proc_root, str(pid), "fd", str(fd)))
    match = _SOCKET_LINK.fullmatch(target) if target is not None else None
    return int(match.group(1)) if match else None


def socket_inodes(proc_root: str, pid: int) -> dict[int, int]:
    """Socket inode -> fd for every socket the process holds."""
    fd_dir = os.path.join(proc_root, str(pid), "fd")
    fds = list_dir(fd_dir)
    if fds is None:
        return {}
    inodes = {}
    for fd in fds:
        inode = socket_inode(proc_root, pid, int(fd))
        if inode is not None:
            inodes[inode] = int(fd)
    return inodes


@dataclass(frozen=True)
class BlockedCall:
    """The system call a thread is blocked in: number and its six arguments."""

    number: int
    args: tuple[int, ...]


def blocked_call(proc_root: str, pid: int, tid: int) -> BlockedCall | None:
    """None when the thread is running, in user space, or gone."""
    text = read_text(os.path.join(proc_root, str(pid), "task", str(tid), "syscall"))
    if not text:
        return None
    fields = text.split()
    if fields[0] in ("running", "-1") or len(fields) < 7:
        return None
    return BlockedCall(int(fields[0]), tuple(int(a, 16) for a in fields[1:7]))


def epoll_targets(proc_root: str, pid: int, epoll_fd: int) -> list[int]:
    """The fds an epoll instance watches (the `tfd:` lines of its fdinfo)."""
    text = read_text(os.path.join(proc_root, str(pid), "fdinfo", str(epoll_fd)))
    if text is None:
        return []
    return [int(line.split()[1]) for line in text.splitlines() if line.startswith("tfd:")]


def poll_targets(proc_root: str, pid: int, address: int, count: int) -> list[int]:
    """The fds of a `struct pollfd` array in the process's memory (needs ptrace rights)."""
    count = min(count, _MAX_POLL_FDS)
    try:
        with open(os.path.join(proc_root, str(pid), "mem"), "rb", buffering=0) as mem:
            mem.seek(address)
            raw = mem.read(8 * count)
    except (OSError, OverflowError, ValueError):
        return []
    return [fd for fd, _, _ in struct.iter_unpack("=ihh", raw[:len(raw) - len(raw) % 8]) if fd >= 0]


def sockets_in_use(proc_root: str, pid: int, tid: int, machine: str = _MACHINE) -> set[int]:
    """Inodes of the sockets thread `tid` is blocked on right now; empty when it shows none."""
    call = blocked_call(proc_root, pid, tid)
    if call is None:
        return set()
    if call.number in _FD_FIRST_CALLS.get(machine, ()):
        fds = [call.args[0]]
    elif call.number in _EPOLL_WAIT_CALLS.get(machine, ()):
        fds = epoll_targets(proc_root, pid, call.args[0])
    elif call.number in _POLL_CALLS.get(machine, ()):
        fds = poll_targets(proc_root, pid, call.args[0], call.args[1])
    else:
        return set()
    inodes = (socket_inode(proc_root, pid, fd) for fd in fds if fd < 1 << 31)
    return {inode for inode in inodes if inode is not None}
