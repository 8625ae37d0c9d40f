"""Kill a process at each syscall that writes state, one run per syscall, with strace's fault
injection (`-e inject=SYSCALL:signal=KILL:when=N`, Debian's strace 6.1; "How SQLite Is Tested",
crash testing, is the model).

`find_points` runs the command once under strace and lists every call of WRITE_SYSCALLS it made;
`kill_at` runs it again from the same starting state and SIGKILLs it on entering that call, so
the call itself never happens. strace counts invocations per syscall and per traced thread, so
the command must stay single-threaded (checked): then "the 7th pwrite64" names one call.
"""

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass

# The calls that change files: data, their flush to the disk, the names in a directory.
WRITE_SYSCALLS = ("write", "writev", "pwrite64", "pwritev", "pwritev2", "fsync", "fdatasync", "ftruncate",
                  "fallocate", "rename", "renameat", "renameat2", "unlink", "unlinkat")
_CALL = re.compile(r"^(\d+)\s+(\w+)\((.*)$")


@dataclass(frozen=True)
class CrashPoint:
    syscall: str
    nth: int        # 1-based, among this syscall's calls
    call: str       # as strace printed it, shortened (for reports)

    def __str__(self) -> str:
        return f"{self.syscall}#{self.nth} {self.call}"


def missing() -> str | None:
    """Why fault injection cannot run here, or None."""
    if not shutil.which("strace"):
        return "strace missing (scripts/setup.d/crash-tests.sh installs Debian's strace)"
    probe = subprocess.run(["strace", "-qq", "-o", "/dev/null", "-e", "trace=none", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"strace cannot trace here (ptrace refused?): {probe.stderr.decode(errors='replace').strip()}"
    return None


def find_points(argv: list[str], env: dict[str, str], log_path: str) -> list[CrashPoint]:
    """Run `argv` once, traced; every call of WRITE_SYSCALLS it made, in order."""
    result = subprocess.run(["strace", "-f", "-qq", "-s", "24", "-o", log_path, "-e",
                             "trace=" + ",".join(WRITE_SYSCALLS), *argv], env=env, capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{argv} failed untouched (exit {result.returncode}): {result.stderr[-2000:]}")
    points, seen, tracees = [], Counter(), set()
    with open(log_path, errors="replace") as f:
        for line in f:
            match = _CALL.match(line)
            if not match or match.group(2) not in WRITE_SYSCALLS:
                continue
            pid, syscall, rest = match.groups()
            tracees.add(pid)
            seen[syscall] += 1
            points.append(CrashPoint(syscall, seen[syscall], f"{syscall}({rest[:70]}"))
    if len(tracees) > 1:
        raise RuntimeError(f"{argv} wrote from {len(tracees)} threads or processes: strace counts calls per "
                           "thread, so a kill point would not name one call")
    return points


def kill_at(point: CrashPoint, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run `argv`, SIGKILLed on entering `point`'s call; returncode -9 if the kill happened."""
    return subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "-e", f"trace={point.syscall}", "-e",
                           f"inject={point.syscall}:signal=KILL:when={point.nth}", *argv],
                          env=env, capture_output=True, text=True, timeout=120)
