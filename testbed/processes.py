"""Starting a coordinator process; stopping daemons the polite way first: SIGTERM, then SIGKILL
after a grace period."""

import contextlib
import signal
import subprocess
import sys
import time

import psutil


def start_coordinator(config: str, log_path, state_path: str | None = None) -> tuple[subprocess.Popen, int]:
    """A `vnode-coordinator --config config` process, once it serves; returns (process, port)."""
    args = [sys.executable, "-m", "vnode_sync.coordinator.main", "--config", config, "--print-port"]
    process = subprocess.Popen(args + (["--state-path", state_path] if state_path else []),
                               stdout=subprocess.PIPE, stderr=open(log_path, "wb"), text=True)
    line = process.stdout.readline()
    if not line.strip().isdigit():
        process.kill()
        process.wait()
        raise AssertionError(f"coordinator did not start: {open(log_path).read()}")
    return process, int(line)


def stop_process(process: subprocess.Popen, sig: int = signal.SIGTERM, grace_seconds: float = 15) -> None:
    """Send `sig`, wait up to `grace_seconds`, then kill; a process already gone is fine."""
    if process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_processes(processes: list[psutil.Process], grace_seconds: float = 10) -> None:
    """SIGTERM to all (JVMs and FUSE servers shut down cleanly), then SIGKILL to what is left."""
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    alive = _wait_exited(processes, grace_seconds)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    _wait_exited(alive, 5)


def _wait_exited(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those still running after `timeout`. A zombie has exited: only its parent can reap it, and
    that parent may be the caller itself (a test standing in for a crashed run) or gone."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in processes if not _exited(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _exited(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE   # is_running: not a reused pid
    except psutil.NoSuchProcess:
        return True


def exit_once_on_signals() -> None:
    """A SIGTERM (a kill, `timeout`) becomes SystemExit(143) and a SIGINT (Ctrl-C) stays
    KeyboardInterrupt, so `finally` blocks stop what a run started. After the first, further SIGTERMs
    and SIGINTs are ignored: `pkill` and `timeout` may both send one, Ctrl-C is often pressed twice,
    and a second exit in the middle of the clean-up would leave daemons, cgroups and disks behind."""
    def stopping(exit_with):
        def handler(*_):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            raise exit_with()
        return handler
    signal.signal(signal.SIGTERM, stopping(lambda: SystemExit(143)))
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:   # not where SIGINT is ignored (nohup, &)
        signal.signal(signal.SIGINT, stopping(KeyboardInterrupt))
