"""Compute side: the TCP connections users' processes hold open to storage nodes.

A storage node cannot tell whose a remote connection is; the compute node can. The
compute agent reports (client address, client port, user, storage address, storage port)
for every established connection from a known user's process to a storage address, and the
coordinator passes each to the storage agents whose node serves that storage address (the
`endpoints` of its storage_nodes entry) as ConnectionOwner records.

The owner is the uid column of /proc/net/tcp{,6}: the effective uid of the process that
made the socket, which is the user's for anything a job starts (a socket handed to a
process of another uid keeps its creator's uid). Only this host's network namespace is
read (the one of `proc_root`/self): jobs in their own network namespaces, and clients
behind NAT, whose address the storage node sees differently, are not covered.

The job: the processes of the connections' owners that hold one of the sockets (by inode,
/proc/<pid>/fd) name it (job_of.py); the first such process found decides. Only those owners'
processes are read, and only when they hold a storage connection.
"""

import os
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from vnode_sync.agents.compute.job_of import job_of
from vnode_sync.agents.handlers.sockets import Endpoint, normalise_address, socket_inodes, tcp_sockets
from vnode_sync.kernel.procfs import owner_uid


class OwnedConnection(NamedTuple):
    client_address: str  # as the storage node sees it, sockets.normalise_address form
    client_port: int
    user: str
    server_address: str  # the storage end as this host sees it (normalised the same way)
    server_port: int
    job: str = ""        # the batch job of the process holding it; "" = none found


def _matches(remote: Endpoint, storage: Iterable[tuple[str | None, int]]) -> bool:
    return any(port == remote[1] and (address is None or address == remote[0]) for address, port in storage)


def storage_connections(users_by_uid: Mapping[int, str], storage: Iterable[tuple[str | None, int]],
                        proc_root: str = "/proc") -> list[OwnedConnection]:
    """Established connections from `users_by_uid`'s processes to `storage` (address, port) pairs.

    An address of None matches any storage node on that port (e.g. every DataNode's 9866).
    """
    wanted = [(normalise_address(a) if a is not None else None, int(p)) for a, p in storage]
    ports = {p for _, p in wanted}
    found, owners = {}, set()
    for port in ports:
        for s in tcp_sockets(proc_root, "self", port):
            if s.established and s.uid in users_by_uid and s.remote[1] == port and _matches(s.remote, wanted):
                found[s.inode] = OwnedConnection(s.local[0], s.local[1], users_by_uid[s.uid], s.remote[0], s.remote[1])
                owners.add(s.uid)
    jobs = jobs_of_sockets(proc_root, set(found), owners)
    return sorted({c._replace(job=jobs.get(inode, "")) for inode, c in found.items()})


def jobs_of_sockets(proc_root: str, inodes: set[int], uids: set[int]) -> dict[int, str]:
    """Socket inode -> the job of a process of `uids` holding it (sockets of no job are left out)."""
    jobs: dict[int, str] = {}
    if not inodes:
        return jobs
    for name in os.listdir(proc_root):
        if not name.isdigit() or owner_uid(os.path.join(proc_root, name)) not in uids:
            continue
        held = inodes.intersection(socket_inodes(proc_root, int(name))) - jobs.keys()
        if held:
            job = job_of(proc_root, int(name))
            if job is not None:
                jobs.update(dict.fromkeys(held, job))
    return jobs
