"""The seam to Lustre: the `lctl` binary, run with argv lists (never a shell)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from vnode_sync.errors import KernelError


class LctlError(KernelError):
    """`lctl` refused a parameter read or write (non-zero exit)."""

    def __init__(self, param: str, message: str, returncode: int | None = None):
        super().__init__(param, message)
        self.returncode = returncode


@dataclass
class Lctl:
    """Runs the `lctl` binary with argv lists (never a shell). Point `path` at a stand-in in tests."""

    path: str = "lctl"
    timeout: float = 10.0

    def _run(self, param: str, argv: list[str]) -> str:
        try:
            done = subprocess.run([self.path, *argv], capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError as e:
            raise LctlError(param, f"cannot run {self.path!r}: {e.strerror}") from e
        except subprocess.TimeoutExpired as e:
            raise LctlError(param, f"{self.path} did not answer within {self.timeout} s") from e
        if done.returncode != 0:
            message = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise LctlError(param, message, done.returncode)
        return done.stdout

    def get_param(self, param: str) -> str:
        return self._run(param, ["get_param", "-n", param])

    def set_param(self, param: str, value: str) -> None:
        self._run(param, ["set_param", f"{param}={value}"])
