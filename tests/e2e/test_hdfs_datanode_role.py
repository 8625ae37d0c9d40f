"""The vnode_datanode role as make dist ships it, against the testbed's real HDFS: one run (serial: 1) takes a
DataNode running on Java 11 without the Java agent to one with -javaagent (the jar from dist, its sha256
checked) and block tokens, restarted as Hadoop's launcher restarts it (hadoop-env.sh's JAVA_HOME and
HDFS_DATANODE_OPTS), and waits for its agent's handshake and for the coordinator to report it enforcing. Then
two users at priorities 4 and 8 write and read through Hadoop's client (DFSClient, which times each transfer):
their rates are their shares of the DataNode's 60 MB/s. A second run changes nothing.

The role installs vnode-sync on the node from dist's wheel and node wheelhouse (no index, no Maven). The
coordinator and the storage agent are the testbed's (LocalCluster, insecure); the storage-agent role is run
by tests/deploy/test_ansible.py.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from tests.conftest import REPO, needs_java, needs_kernel, unique_name
from tests.deploy.test_ansible import WHY_NO_ANSIBLE
from testbed.hdfs_cluster import HdfsCluster, Transfer, installed_java
from testbed.local_cluster import LocalCluster, LocalNode
from testbed.unix_users import local_users
from vnode_sync.datanode.channel import REQUIRED_HOOKS, WOVEN, ThrottleChannel
from vnode_sync.distribution import version

pytestmark = [needs_kernel, needs_java, pytest.mark.slow,
              pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")]

MB = 1_000_000
MiB = 1 << 20
NODE_BW = 60 * MB
SITE_OPTION = "-Dvnode.test.site_option=kept"   # the site's own HDFS_DATANODE_OPTS, which must stay
# The other end-to-end splits' tolerance (tests/e2e/test_hdfs_datanode_throttle.py).
TOLERANCE = 0.10
# Each user's transfer at its share (alice's read: 100 MB at 20 MB/s). A writer's client times its create
# and its close, which waits for the last packets' acknowledgements: 0.1-0.5 s more than the DataNode's
# steady 20 and 40 MB/s take (measured there in 0.5 s windows), so writes last longer.
READ_SECONDS, WRITE_SECONDS = 5, 10


@pytest.fixture
def java11():
    runtime = installed_java(11)
    if runtime is None:
        pytest.skip("no Java 11 runtime installed; run scripts/setup.d/java11.sh")
    return runtime


@pytest.fixture
def users():
    with local_users("vsd", (4, 8), first_uid=64_631) as made:
        yield made


@pytest.fixture
def site_dir():
    """The DataNode host's directories (venv, jar, conf, the agent's socket): short, for the socket's path."""
    path = tempfile.mkdtemp(prefix=unique_name("dnrole") + ".")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def shipped_roles(dist: str, into: str) -> str:
    """deploy/ansible as make dist ships it: the tarball, checked against SHA256SUMS, unpacked."""
    (tarball,) = glob.glob(os.path.join(dist, "vnode-sync-ansible-*.tar.gz"))
    subprocess.run(["sha256sum", "--check", "--quiet", "--ignore-missing", "SHA256SUMS"], cwd=dist, check=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(into, filter="data")
    return os.path.join(into, os.path.basename(tarball).removesuffix(".tar.gz"), "roles")


def run_role(site_dir: str, roles: str, settings: dict) -> subprocess.CompletedProcess:
    host = {"ansible_connection": "local"}
    inventory = {"all": {"vars": settings, "children": {"vnode_datanode": {"hosts": {"dn0": host}}}}}
    with open(os.path.join(site_dir, "inventory.yml"), "w") as f:
        yaml.safe_dump(inventory, f)
    # site.yml's DataNode play, without the storage-agent role (the testbed runs the agent).
    play = [{"name": "DataNodes one at a time", "hosts": "vnode_datanode", "serial": 1, "gather_subset": ["min"],
             "roles": ["vnode_datanode"]}]
    with open(os.path.join(site_dir, "play.yml"), "w") as f:
        yaml.safe_dump(play, f)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_ROLES_PATH=roles,
               ANSIBLE_RETRY_FILES_ENABLED="false", LC_ALL="C.UTF-8")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(["ansible-playbook", "-i", os.path.join(site_dir, "inventory.yml"),
                           "-e", "ansible_python_interpreter=/usr/bin/python3", os.path.join(site_dir, "play.yml")],
                          capture_output=True, text=True, timeout=300, env=env)


def host_recap(output: str) -> dict[str, int]:
    """The PLAY RECAP's counts of the DataNode host."""
    line = next(line for line in output.splitlines() if line.startswith("dn0 ") and "ok=" in line)
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}


def concurrently(*calls):
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return [f.result() for f in [pool.submit(call) for call in calls]]


def assert_split(measured: dict[str, float], targets: dict[str, float], what: str) -> None:
    for user, target in targets.items():
        assert measured[user] == pytest.approx(target, rel=TOLERANCE), (what, measured, targets)


def test_the_role_from_dist_takes_a_java11_datanode_to_a_measured_split_and_a_rerun_changes_nothing(
        product_dist, java11, users, site_dir):
    began = time.monotonic()
    jar_name = f"vnode-sync-datanode-throttle-{version()}.jar"
    with zipfile.ZipFile(os.path.join(product_dist, jar_name)) as z:
        if not any(n.endswith("dnthrottle/Agent.class") for n in z.namelist()):
            pytest.skip("dist holds a stand-in jar: run scripts/setup.d/datanode-throttle.sh to build the agent")
    roles = shipped_roles(product_dist, os.path.join(site_dir, "unpacked"))
    alice, bob = users
    socket_path = os.path.join(site_dir, "run", "datanode.throttle", "control.sock")
    jar = os.path.join(site_dir, "opt", "lib", jar_name)

    # The NameNode has block tokens on (the HDFS admin's part, docs/deploy-hdfs.md #6); the DataNode's file not.
    # One block a file: each new block's pipeline costs a writer more of its time. The disk has room for three
    # blocks: two writers start at once, and the NameNode may count the first one's block twice for a heartbeat
    # (HdfsCluster._wait_until_writable).
    with HdfsCluster(unique_name("dnrole"), datanodes=1, disk_mb=2048, datanode_java_home=java11.home,
                     hdfs_site={"dfs.block.access.token.enable": "true", "dfs.blocksize": 512 * MiB}) as hdfs:
        (dn,) = hdfs.datanodes
        hdfs_site = os.path.join(hdfs.conf_dir(dn), "hdfs-site.xml")
        with open(hdfs_site) as f:
            site_text = f.read()
        with open(hdfs_site, "w") as f:
            f.write(site_text.replace("<name>dfs.block.access.token.enable</name><value>true</value>",
                                      "<name>dfs.block.access.token.enable</name><value>false</value>"))
        with open(os.path.join(hdfs.conf_dir(dn), "hadoop-env.sh"), "w") as f:
            f.write(f'export JAVA_HOME={java11.home}\nexport HDFS_DATANODE_OPTS="{SITE_OPTION}"\n')
        node = LocalNode(dn.id, (dn.loop_device,), NODE_BW, NODE_BW, {"kind": "generic"},
                         {"backend": "datanode-throttle", "datanode_throttle": {"socket": socket_path}})
        with LocalCluster(unique_name("dnrole"), [alice, bob], [node]) as cluster:
            (before,) = cluster.status()["nodes"]
            assert not before["enforcing"] and socket_path in before["not_enforcing"], before
            vnodectl_config = os.path.join(site_dir, "vnodectl.yaml")
            with open(vnodectl_config, "w") as f:
                yaml.safe_dump({"coordinator": cluster.address, "insecure": True}, f)
            old_pid = dn.pid
            settings = {
                "vnode_common_dist": product_dist, "vnode_common_version": version(),
                **{f"vnode_common_{key}": os.path.join(site_dir, path) for key, path in (
                    ("dist_dir", "opt/dist"), ("venv", "opt/venv"), ("bin_dir", "bin"), ("config_dir", "etc"),
                    ("pki_dir", "etc/pki"), ("state_dir", "state"), ("log_dir", "log"), ("run_dir", "run"))},
                "vnode_common_apt_packages": [],   # python3-venv is here (setup); apt takes seconds to say so
                "vnode_common_use_systemd": False, "vnode_common_coordinator_host": "localhost",
                "vnode_coordinator_vnodectl_config": vnodectl_config,
                "vnode_datanode_jar_dir": os.path.join(site_dir, "opt", "lib"),
                "vnode_datanode_conf_dir": hdfs.conf_dir(dn), "vnode_datanode_node_id": dn.id,
                "vnode_datanode_user": "root", "vnode_datanode_group": "root",
                "vnode_datanode_restart_command": ["env", f"PYTHONPATH={REPO}", sys.executable, "-m",
                                                   "testbed.hdfs_cluster", "restart-datanode", "--workdir",
                                                   hdfs.workdir, dn.id],
                "vnode_datanode_verify_seconds": 60, "vnode_datanode_data_address": dn.xfer_address,
            }
            os.makedirs(os.path.join(site_dir, "bin"))
            started = time.monotonic()
            first = run_role(site_dir, roles, settings)
            first_seconds = time.monotonic() - started
            assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
            assert "RUNNING HANDLER [vnode_datanode : Restart the DataNode" in first.stdout

            # What the run left: a DataNode on Java 11 with the site's options, the agent from dist, tokens on.
            hdfs.reload_datanode_pids()
            assert dn.pid != old_pid
            assert os.path.realpath(f"/proc/{dn.pid}/exe") == os.path.realpath(java11.java)
            with open(f"/proc/{dn.pid}/cmdline") as f:
                argv = f.read().split("\0")
            assert SITE_OPTION in argv and f"-javaagent:{jar}=socket={socket_path}" in argv, argv
            with open(os.path.join(product_dist, jar_name), "rb") as shipped, open(jar, "rb") as placed:
                assert shipped.read() == placed.read()
            with open(hdfs_site) as f:
                assert "<name>dfs.block.access.token.enable</name><value>true</value>" in f.read()
            hello = ThrottleChannel(socket_path).hello()
            assert hello.version == version() and {h: hello.hooks.get(h) for h in REQUIRED_HOOKS} == \
                {h: WOVEN for h in REQUIRED_HOOKS}, hello
            # The handshake names the JVM and the DataNode's block tokens (now on): nothing for the node's
            # degraded list (docs/deploy-hdfs.md #1, #6).
            assert hello.java.startswith("11.") and hello.block_tokens == "true", hello
            nodes = json.loads(cluster.vnodectl("nodes", "--json").stdout)["nodes"]
            assert [(n["node_id"], n["enforcing"], n["degraded"]) for n in nodes] == [(dn.id, True, [])], nodes

            # Hadoop's client, as each user, times its own transfers: writes, then reads from the disk.
            hdfs.wait_until_serving(blocks=2)  # both users' writers start at once, a 512 MiB block each
            measuring = time.monotonic()
            sizes = {alice.name: 20 * MB * WRITE_SECONDS, bob.name: 40 * MB * WRITE_SECONDS}
            wrote = concurrently(*[lambda u=u: hdfs.write_file(f"/{u.name}.bin", sizes[u.name], as_uid=u.uid,
                                                               hdfs_user=u.name) for u in (alice, bob)])
            hdfs.evict_page_cache()
            readers = [hdfs.start_read(f"/{u.name}.bin", as_uid=u.uid, hdfs_user=u.name, seconds=READ_SECONDS)
                       for u in (alice, bob)]
            read = [Transfer.parse(r.communicate(timeout=60)[0]) for r in readers]
            measuring = time.monotonic() - measuring
            targets = {alice.name: NODE_BW * 4 / 12, bob.name: NODE_BW * 8 / 12}
            writes = {u.name: t.bytes_per_second for u, t in zip((alice, bob), wrote)}
            reads = {u.name: t.bytes_per_second for u, t in zip((alice, bob), read)}

            started = time.monotonic()
            second = run_role(site_dir, roles, settings)
            second_seconds = time.monotonic() - started
            print(f"\nrole from dist on a Java {java11.feature} DataNode: first run {first_seconds:.1f} s, "
                  f"second {second_seconds:.1f} s; measured by Hadoop's client in {measuring:.1f} s, MB/s "
                  f"(targets 20 / 40): writes {writes[alice.name] / MB:.1f} / {writes[bob.name] / MB:.1f}, "
                  f"reads {reads[alice.name] / MB:.1f} / {reads[bob.name] / MB:.1f}; "
                  f"{time.monotonic() - began:.1f} s in all")
            assert_split(writes, targets, "writes at 4 : 8")
            assert_split(reads, targets, "reads at 4 : 8")
            assert second.returncode == 0, second.stdout[-4000:]
            assert host_recap(second.stdout)["changed"] == 0, second.stdout[-4000:]
            assert "RUNNING HANDLER" not in second.stdout
            hdfs.reload_datanode_pids()
            assert os.path.exists(f"/proc/{dn.pid}") and ThrottleChannel(socket_path).hello().started_ms == \
                hello.started_ms, "the second run restarted nothing"
