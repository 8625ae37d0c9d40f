"""How many process-connector records wake the agent while other programs start on the host,
with the kernel-side filter (ProcConnector.watch) against the unfiltered socket as baseline.

    sudo .venv/bin/python -m benchmarks.proc_events [--starts 8] [--watched-threads 40]

Two connector sockets listen at once: one unfiltered (what every agent read before the
filter existed), one watching a stand-in DataNode, a Python process of ours that starts
--watched-threads threads while --starts JVMs (`java -version`, each making and naming a
few dozen threads; Python processes without Java) start and exit elsewhere on the host.
Both sockets must carry every record about the watched process; the filtered one should
carry little else. Each record on the socket is a wake-up or a parse in the agent.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections import Counter

from vnode_sync.agents.handlers.proc_connector import PROC_EVENT_EXEC, ProcConnector, ProcEvent

WATCHED = """
import sys, threading
threads = [threading.Thread(target=int, name=f"handler-{i}") for i in range(int(sys.argv[1]))]
sys.stdin.readline()
for t in threads:
    t.start()
    t.join()
"""


def drain(connector: ProcConnector, quiet_seconds: float = 0.3) -> list[ProcEvent]:
    events: list[ProcEvent] = []
    while batch := connector.read(quiet_seconds):
        events += batch
    return events


def other_program() -> list[str]:
    java = shutil.which("java")
    return [java, "-version"] if java else [sys.executable, "-c", "import threading; [threading.Thread("
                                                                  "target=int).start() for _ in range(20)]"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=8, help="programs started elsewhere on the host")
    parser.add_argument("--watched-threads", type=int, default=40)
    args = parser.parse_args()
    program = other_program()
    unfiltered, filtered = ProcConnector(), ProcConnector()
    watched = subprocess.Popen([sys.executable, "-c", WATCHED, str(args.watched_threads)],
                               stdin=subprocess.PIPE, text=True)
    try:
        filtered.watch(watched.pid)
        time.sleep(0.2)
        for connector in (unfiltered, filtered):
            drain(connector, 0.05)  # start-up of the watched process: not counted
        started = time.monotonic()
        watched.stdin.write("go\n")
        watched.stdin.flush()
        for _ in range(args.starts):
            subprocess.run(program, capture_output=True, check=True)
        seconds = time.monotonic() - started
        got = {"unfiltered": drain(unfiltered), "filtered": drain(filtered)}
    finally:
        watched.communicate("")
        unfiltered.close()
        filtered.close()
    about_watched = {name: sorted((e.kind, e.tid) for e in events if e.tgid == watched.pid)
                     for name, events in got.items()}
    print(f"{args.starts} x `{' '.join(os.path.basename(a) for a in program)}` started elsewhere and "
          f"{args.watched_threads} threads in the watched process, over {seconds:.1f} s:")
    for name, events in got.items():
        kinds = Counter("exec" if e.kind == PROC_EVENT_EXEC else "other" for e in events if e.tgid != watched.pid)
        print(f"  {name:10s}: {len(events):5d} records delivered, {len(about_watched[name]):4d} about the "
              f"watched process, {kinds['exec']} exec and {kinds['other']} other records about other processes")
    ratio = len(got["filtered"]) / len(got["unfiltered"])
    same = about_watched["filtered"] == about_watched["unfiltered"]
    print(f"filtered/unfiltered records: {ratio:.3f}; the watched process's records "
          f"{'identical on both sockets' if same else 'DIFFER between the sockets'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
