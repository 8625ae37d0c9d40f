"""End to end: jobs as VNodes (issue 61, item 3) with a real Slurm and a real HDFS.

One user runs two Slurm jobs at once, each a Hadoop FileSystem reader of its own file on one
DataNode (the in-DataNode scheduler, a disk paced at 60 MB/s): job A asks `vnode_priority=30`, job B
`vnode_priority=10` through the batch hooks' request syntax. A compute agent on the jobs' node (this
host) reports each reader's connection with its job (SLURM_JOB_ID), so the coordinator charges it to
the job's VNode `user.job`, a leaf under the user: the two jobs' rates, counted by the readers' own
processes (rchar), split 3 : 1 within 10 %. Under one VNode per user they would split about evenly.
`vnodectl status` lists each job with its VNode.
"""

import os
import shlex
import subprocess
import sys
import time

import pytest
import yaml

from tests.batch.test_slurm import _why_not
from tests.conftest import needs_java, needs_kernel, unique_name
from tests.e2e.test_hdfs import MB, MiB, NODE_BW
from testbed.hdfs_vnode_cluster import hdfs_vnode_cluster
from testbed.local_cluster import LocalUser
from testbed.processes import stop_process
from testbed.share_watch import CacheDropper, ClientBytes, block_files, first_window_that_holds, interval_rates
from testbed.slurm import LocalSlurm, SlurmSettings
from testbed.unix_users import free_uids, unix_users
from vnode_sync.agents.compute.placement import job_pids
from vnode_sync.batch.cli import SLURM_WRAPPERS, install_hooks

pytestmark = [needs_kernel, needs_java, pytest.mark.slow]

POLICY = {"sharing": "work-conserving", "control_seconds": 0.5}
WEIGHTS = {"a": 30, "b": 10}
TOLERANCE = 0.10
WINDOW_SECONDS = 5.0


def test_two_slurm_jobs_of_one_user_read_at_their_own_weights_through_their_job_vnodes():
    why = _why_not()
    if why:
        pytest.skip(why)
    name = unique_name("slurmjobs")
    uid, = free_uids(1, 64_871)
    user_name = f"vsj{uid}"
    with unix_users([user_name], [uid], shell="/bin/sh", user_group=True):
        user = LocalUser(user_name, uid, 10, active=False)
        with hdfs_vnode_cluster(name, [user], NODE_BW, datanodes=1, policy=POLICY, backend="datanode-throttle",
                                agent_settings={"report_seconds": 0.25}, disk="paced", disk_read_mbps=NODE_BW / MB,
                                before_agents=_write_job_files(user)) as (hdfs, cluster), \
                CacheDropper(block_files(hdfs)):
            dn = hdfs.datanodes[0]
            slurm, compute = _start_slurm_and_compute_agent(name, cluster, dn)
            try:
                jobs = {tag: slurm.sbatch(user.name, _reader_script(hdfs, user, f"/{user.name}/job-{tag}.bin"),
                                          f"--comment=vnode_priority={weight}") for tag, weight in WEIGHTS.items()}
                for job in jobs.values():
                    slurm.wait_for_state(job, "RUNNING", timeout=30)
                readers = {tag: _reader_pid(job, user.uid, cluster) for tag, job in jobs.items()}
                clients = {tag: ClientBytes(pid, "rchar") for tag, pid in readers.items()}
                vnodes = {tag: f"{user.name}.{job}" for tag, job in jobs.items()}
                cluster.wait_for(lambda: all(_measured(cluster, v) > 1 * MB for v in vnodes.values()), timeout=30,
                                 what=f"each job's reads charged to its VNode {sorted(vnodes.values())}",
                                 explain=lambda: cluster.vnodectl("status").stdout)
                time.sleep(2.0)   # the center's demand estimates, then its weights at the edge

                def measure():
                    seen = interval_rates(lambda: {t: c() for t, c in clients.items()}, WINDOW_SECONDS)
                    mean = {t: sum(i[t] for i in seen) / len(seen) for t in clients}
                    print(f"job a (weight {WEIGHTS['a']}) {mean['a'] / MB:.1f} MB/s, "
                          f"job b (weight {WEIGHTS['b']}) {mean['b'] / MB:.1f} MB/s")
                    return mean

                def missed(mean):
                    wanted = WEIGHTS["a"] / WEIGHTS["b"]
                    if mean["b"] < 1 * MB or abs(mean["a"] / mean["b"] / wanted - 1) > TOLERANCE:
                        return f"a/b {mean['a'] / max(mean['b'], 1):.2f}, not {wanted:.0f} within {TOLERANCE:.0%}"
                    return None

                first_window_that_holds(measure, missed, "two jobs of one user")
                status = cluster.vnodectl("status").stdout
                print(status)
                for tag, job in jobs.items():
                    assert f"job {job} on {slurm.node}: VNode {vnodes[tag]}" in status
            finally:
                slurm.command(["scancel", "--user", user.name])
                stop_process(compute)
                slurm.stop()


def _write_job_files(user: LocalUser):
    def write(hdfs) -> None:
        for tag in WEIGHTS:
            hdfs.write_file(f"/{user.name}/job-{tag}.bin", 128 * MiB, as_uid=user.uid, hdfs_user=user.name,
                            on_datanode=hdfs.datanodes[0])
        hdfs.evict_page_cache()
    return write


def _reader_script(hdfs, user: LocalUser, path: str) -> str:
    """A batch job that reads `path` again and again for 300 s through Hadoop's FileSystem client."""
    argv = hdfs.client_command("VnodeSyncHdfsStream", "read", hdfs.namenode_uri, path, "300")
    return f"export HADOOP_USER_NAME={user.name}; exec {shlex.join(argv)}"


def _reader_pid(job: str, uid: int, cluster, timeout: float = 30) -> int:
    """The job's reader JVM (its environment names the job, as every task's does)."""
    def java() -> int | None:
        for pid in job_pids(job, uid):
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == "java":
                        return pid
            except OSError:
                continue
        return None
    return cluster.wait_for(java, timeout, f"job {job}'s reader JVM")


def _measured(cluster, vnode: str) -> float:
    entry = next((u for u in cluster.status()["users"] if u["name"] == vnode), None)
    return sum(n["measured_read_bps"] for n in entry["nodes"]) if entry else 0.0


def _start_slurm_and_compute_agent(name: str, cluster, dn):
    """Slurm with the batch hooks (its node is this host), and a compute agent named as that node."""
    hooks_dir, config = os.path.join(cluster.workdir, "hooks"), os.path.join(cluster.workdir, "batch.yaml")
    with open(config, "w") as f:
        f.write(f"coordinator: {cluster.address}\ntimeout_seconds: 5\n"
                f"spool_dir: {cluster.workdir}/spool\nlog_file: {cluster.workdir}/batch.log\n")
    install_hooks(hooks_dir, SLURM_WRAPPERS, config)
    os.chmod(cluster.workdir, 0o755)
    slurm = LocalSlurm(name, SlurmSettings(prolog=os.path.join(hooks_dir, "slurm-prolog"),
                                           epilog=os.path.join(hooks_dir, "slurm-epilog")))
    slurm.start()
    compute_config = os.path.join(cluster.workdir, "compute.yaml")
    with open(compute_config, "w") as f:
        yaml.safe_dump({"node_id": slurm.node, "role": "compute", "coordinator": cluster.address,
                        "cgroup_name": f"{name}.compute", "teardown_on_exit": True, "insecure": True,
                        "compute": {"storage_endpoints": [f"{dn.host}:{dn.ports.data}"]}}, f)
    compute = subprocess.Popen([sys.executable, "-m", "vnode_sync.agents.main", "--config", compute_config],
                               stderr=open(os.path.join(cluster.workdir, "compute.log"), "wb"))
    return slurm, compute
