"""Run inside the cgroup-v2 guest: a real vnode-coordinator and a real vnode-agent (io-v2 backend,
HDFS handler discovery) against a multi-threaded server process whose handler threads serve two
users. The agent must not move the process and must say why, in its log and in `vnodectl status`.

The server stands in for a DataNode (a JVM is too slow under software emulation): it accepts on a
data port and serves each connection in a thread named like a DataNode's ("DataXceiver for"),
which is what the hdfs discovery plug-in looks for; the two clients run as the two users' uids,
so the plug-in tells the threads' users apart by the socket owner, as it does for a same-host
HDFS client.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

from testbed.local_cluster import LocalCluster, LocalNode, LocalUser

USERS = [LocalUser("alice", 64_601, 8), LocalUser("bob", 64_602, 4)]
POLL_SECONDS = 1.0   # each poll is a Status call: on the guest's one emulated CPU, polls slow what they wait for
SERVER = """
import socket, sys, threading
def serve(conn):
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
        f.write("DataXceiver for")
    conn.recv(1)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
CLIENT = "import socket, sys, time; s = socket.create_connection(('127.0.0.1', int(sys.argv[1]))); time.sleep(600)"


def cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return f.read().strip()


def client_as(uid: int, port: int) -> subprocess.Popen:
    # The system Python: the project's venv lives under root's home, which other uids cannot enter.
    return subprocess.Popen(["/usr/bin/python3", "-c", CLIENT, str(port)], user=uid, group=uid, cwd="/")


workdir = tempfile.mkdtemp(prefix="vnode-sync-guest-refusal.")
server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline())
clients = [client_as(u.uid, port) for u in USERS]
pid_file = os.path.join(workdir, "server.pid")
with open(pid_file, "w") as f:
    f.write(str(server.pid))
node = LocalNode("guest", ("/dev/vda",), 10_000_000, 10_000_000,
                 discovery={"kind": "hdfs", "pid_file": pid_file, "data_port": port})
cluster = LocalCluster(f"vnode-sync-guest-refusal.{os.getpid()}", USERS, [node], workdir=workdir,
                       agent_settings={"backend": "io-v2", "run_dir": workdir})   # the guest's /run is read-only
exit_code = 1
try:
    before = cgroup_of(server.pid)
    started = time.monotonic()
    cluster.start(timeout=120, poll_seconds=POLL_SECONDS)   # Python and gRPC start slowly under software emulation
    print(f"AGENT_REFUSAL cluster started in {time.monotonic() - started:.1f} s")
    errors = cluster.wait_for(lambda: [e for n in cluster.status()["nodes"] for e in n.get("errors", [])
                                       if f"process {server.pid} serves several users" in e
                                       and "alice, bob" in e],
                              timeout=120, interval=POLL_SECONDS,
                              what="the agent's refusal, naming both users, in vnodectl status")
    print(f"AGENT_REFUSAL refusal in status {time.monotonic() - started:.1f} s after the start")
    after = cgroup_of(server.pid)
    with open(os.path.join(workdir, "agent-guest.log")) as f:
        logged = [line.strip() for line in f if "serves several users" in line]
    print(f"AGENT_REFUSAL cgroup before={before} after={after}")
    print(f"AGENT_REFUSAL status: {errors[0]}")
    print(f"AGENT_REFUSAL log: {logged[0] if logged else 'NONE'}")
    both_seen = "seen so far: alice, bob" in errors[-1]
    exit_code = 0 if before == after and logged and both_seen else 1
finally:
    if exit_code != 0:
        for name in ("coordinator", "agent-guest"):
            with open(os.path.join(workdir, f"{name}.log"), errors="replace") as f:
                print(f"--- {name}.log\n" + "".join(f.readlines()[-25:]))
    for process in (*clients, server):
        process.kill()
        process.wait()
    cluster.stop()
print("AGENT_REFUSAL_OK" if exit_code == 0 else "AGENT_REFUSAL_FAILED")
sys.exit(exit_code)
