"""Run inside the cgroup-v2 guest: the storage agent's reconcile pass (agents/storage/reconciler.py)
with the io-v2 backend on the real kernel refuses to move a real multi-threaded process whose
handler threads serve two users, and says why. Discovery is listed here (which TID serves which
user), standing in for the HDFS handler discovery, which needs a DataNode."""

import os
import subprocess
import sys
import time

from vnode_sync.agents.handlers.base import HandlerThread, PollingWait, UserDirectory
from vnode_sync.agents.storage.reconciler import Reconciler
from vnode_sync.kernel.io_v2 import IoV2Backend
from vnode_sync.kernel.types import DeviceNumber
from vnode_sync.wire import vnode_pb2 as pb

DEVICE = "/dev/vda"
SERVER = ("import threading, time\n"
          "[threading.Thread(target=time.sleep, args=(600,), daemon=True).start() for _ in range(2)]\n"
          "time.sleep(600)")


class ListedThreads(PollingWait):
    name = "listed"
    shared_process = False

    def __init__(self):
        self.served: dict[int, tuple[int, str]] = {}   # tid -> (pid, user)

    def scan(self, users: UserDirectory):
        return [HandlerThread(pid, tid, user) for tid, (pid, user) in self.served.items()]


def state(users: dict[str, int]) -> pb.DesiredState:
    return pb.DesiredState(
        generation=1, node_id="guest",
        vnodes=[pb.VNodeSpec(user=u, uid=uid, priority=1, shares=[pb.ResourceShare(device=DEVICE, read=pb.Share(ceiling_bps=5_000_000))])
                for u, uid in users.items()],
        default_vnode=pb.VNodeSpec(shares=[pb.ResourceShare(device=DEVICE, read=pb.Share(ceiling_bps=1_000_000))]),
        users=[pb.User(name=n, uid=uid) for n, uid in users.items()])


def cgroup_of(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return f.read().strip()


server = subprocess.Popen([sys.executable, "-c", SERVER])
backend = IoV2Backend("/sys/fs/cgroup", f"vnode-sync.agent-{os.getpid()}")
try:
    while len(os.listdir(f"/proc/{server.pid}/task")) < 3:
        time.sleep(0.05)
    tids = sorted(int(t) for t in os.listdir(f"/proc/{server.pid}/task"))
    before = cgroup_of(server.pid)
    discovery = ListedThreads()
    discovery.served = {tids[1]: (server.pid, "alice"), tids[2]: (server.pid, "bob")}
    dev = DeviceNumber(*map(int, os.environ["GUEST_DISK_DEV"].split(":")))
    reconciler = Reconciler(backend, discovery, {DEVICE: dev})
    reconciler.apply(state({"alice": 1001, "bob": 1002}))
    after = cgroup_of(server.pid)
    said = [e for e in reconciler.errors if f"process {server.pid} serves several users" in e]
    print(f"SHARED cgroup before={before} after={after} vnodes={backend.vnodes()}")
    print(f"SHARED reason: {said[0] if said else 'NONE'}")
    ok = before == after and said and all(server.pid not in backend.members(v) for v in backend.vnodes())
    print("SHARED_OK" if ok else "SHARED_FAILED")
finally:
    server.kill()
    server.wait()
    backend.teardown()
