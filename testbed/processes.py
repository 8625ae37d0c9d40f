"""Stopping daemons the polite way first: SIGTERM, then SIGKILL after a grace period."""

import contextlib
import signal
import subprocess

import psutil


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
    _, alive = psutil.wait_procs(processes, timeout=grace_seconds)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=5)
