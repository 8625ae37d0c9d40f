"""A faithful fake /proc in a temp dir: processes, threads, fds, TCP tables, blocked syscalls.

Files have the kernel's formats (tcp tables with host-order hex words, `socket:[inode]`
fd links, epoll fdinfo `tfd:` lines, `syscall` as "nr args... sp pc"), so the code under
test reads them exactly as it reads the real thing.
"""

import ipaddress
import os
import sys

from vnode_sync.agents.handlers.sockets import TcpSocket


def encode_endpoint(address: str, port: int, ipv6: bool) -> str:
    ip = ipaddress.ip_address(address)
    if ipv6 and ip.version == 4:
        ip = ipaddress.IPv6Address(f"::ffff:{address}")
    raw = ip.packed
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return f"{raw.hex().upper()}:{port:04X}"


def tcp_table(rows: list[TcpSocket], ipv6: bool) -> str:
    header = ("  sl  local_address                         remote_address                        st tx_queue "
              "rx_queue tr tm->when retrnsmt   uid  timeout inode\n")
    lines = [header]
    for n, s in enumerate(rows):
        lines.append(f"{n:4d}: {encode_endpoint(*s.local, ipv6)} {encode_endpoint(*s.remote, ipv6)} "
                     f"{s.state:02X} 00000000:00000000 00:00000000 00000000 {s.uid:5d}        0 {s.inode} 1 "
                     "0000000000000000 20 4 30 10 -1\n")
    return "".join(lines)


class FakeProc:
    def __init__(self, root: str):
        self.root = root
        self.tcp: dict[int, list[TcpSocket]] = {}
        self.tcp6: dict[int, list[TcpSocket]] = {}

    def _path(self, pid: int, *parts: str) -> str:
        return os.path.join(self.root, str(pid), *parts)

    def _write(self, path: str, text: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)

    def process(self, pid: int, cmdline: list[str], uid: int = 0, cwd: str | None = None) -> None:
        self._write(self._path(pid, "cmdline"), "\0".join(cmdline) + "\0")
        self._write(self._path(pid, "status"), f"Name:\tjava\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        self._write(self._path(pid, "environ"), "PATH=/usr/bin\0")
        os.makedirs(self._path(pid, "fd"), exist_ok=True)
        os.makedirs(self._path(pid, "fdinfo"), exist_ok=True)
        if cwd:
            os.symlink(cwd, self._path(pid, "cwd"))
        self.tcp[pid], self.tcp6[pid] = [], []
        self.thread(pid, pid, "java")
        self.sockets(pid)

    def thread(self, pid: int, tid: int, comm: str, syscall: str = "running") -> None:
        self._write(self._path(pid, "task", str(tid), "comm"), comm + "\n")
        self.syscall(pid, tid, syscall)

    def syscall(self, pid: int, tid: int, text: str) -> None:
        self._write(self._path(pid, "task", str(tid), "syscall"), text + "\n")

    def blocked_in(self, pid: int, tid: int, number: int, *args: int) -> None:
        padded = list(args) + [0] * (6 - len(args))
        self.syscall(pid, tid, " ".join([str(number)] + [hex(a) for a in padded] + ["0x7ffd0000", "0x7f000000"]))

    def end_thread(self, pid: int, tid: int) -> None:
        task = self._path(pid, "task", str(tid))
        for name in os.listdir(task):
            os.unlink(os.path.join(task, name))
        os.rmdir(task)

    def socket_fd(self, pid: int, fd: int, inode: int) -> None:
        os.symlink(f"socket:[{inode}]", self._path(pid, "fd", str(fd)))

    def epoll_fd(self, pid: int, fd: int, watched: list[int]) -> None:
        path = self._path(pid, "fd", str(fd))
        if not os.path.lexists(path):
            os.symlink("anon_inode:[eventpoll]", path)
        lines = ["pos:\t0", "flags:\t02", "mnt_id:\t15", "ino:\t1057"]
        lines += [f"tfd: {t:8d} events:       19 data: {t:16x}  pos:0 ino:61d sdev:9" for t in watched]
        self._write(self._path(pid, "fdinfo", str(fd)), "\n".join(lines) + "\n")

    def add_socket(self, pid: int, sock: TcpSocket, ipv6: bool = True) -> None:
        (self.tcp6 if ipv6 else self.tcp)[pid].append(sock)
        self.sockets(pid)

    def remove_socket(self, pid: int, inode: int) -> None:
        for table in (self.tcp, self.tcp6):
            table[pid] = [s for s in table[pid] if s.inode != inode]
        self.sockets(pid)

    def sockets(self, pid: int) -> None:
        self._write(self._path(pid, "net", "tcp"), tcp_table(self.tcp[pid], ipv6=False))
        self._write(self._path(pid, "net", "tcp6"), tcp_table(self.tcp6[pid], ipv6=True))
