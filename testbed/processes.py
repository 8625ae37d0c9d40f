"""Stopping a child daemon the polite way first."""

import signal
import subprocess


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
