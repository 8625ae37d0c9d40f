"""The vnode_datanode role on this host against a fake Hadoop conf dir, with no HDFS: check mode changes
nothing; a run puts the jar in place (checked against SHA256SUMS), adds -javaagent to HDFS_DATANODE_OPTS in a
managed block and block tokens to hdfs-site.xml, changing nothing else, restarts the DataNode (here a stand-in
for its Java agent) and waits for the handshake; a second run changes nothing and a run against a DataNode whose
agent is gone fails; a jar that does not match
SHA256SUMS changes nothing; a Java agent with a required hook left unwoven stops the play. The storage agent's
datanode_throttle: section names the -javaagent socket.

The end-to-end run (a running DataNode without the agent taken to a split measured by Hadoop's client) is
tests/e2e/test_hdfs_datanode_role.py, on the testbed's real HDFS.
"""

import grp
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, stand_in_jar
from tests.deploy.test_ansible import ANSIBLE_DIR, WHY_NO_ANSIBLE, recap
from vnode_sync.agents.config import load_agent_config
from vnode_sync.datanode.readiness import READY, readiness
from vnode_sync.distribution import version

pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY_NO_ANSIBLE is not None, reason=WHY_NO_ANSIBLE or "")]

ROLES = os.path.join(ANSIBLE_DIR, "roles")
HADOOP_ENV = """# Hadoop's own settings, the site's
export JAVA_HOME=/usr/lib/jvm/java-11-openjdk-amd64
export HDFS_DATANODE_OPTS="-Xmx1g"
"""
HDFS_SITE = """<?xml version="1.0"?>
<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>
<configuration>
  <!-- the site's comment: <property><name>dfs.block.access.token.enable</name><value>x</value></property> -->
  <property>
    <name>dfs.datanode.data.dir</name>
    <value>/data/1/dfs/dn</value>
  </property>
  <property>
    <name>dfs.block.access.token.enable</name>
    <value>false</value>
  </property>
</configuration>
"""


def make_dist(directory, tamper: bool = False) -> str:
    """make dist's jar and its SHA256SUMS line (the rest of a dist is vnode_common's, not read here)."""
    os.makedirs(directory)
    name = f"vnode-sync-datanode-throttle-{version()}.jar"
    shutil.move(stand_in_jar(directory, version()), os.path.join(directory, name))
    with open(os.path.join(directory, name), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if tamper:
        with open(os.path.join(directory, name), "ab") as f:
            f.write(b"\0")
    with open(os.path.join(directory, "SHA256SUMS"), "w") as f:
        f.write(f"{digest}  {name}\n")
    return str(directory)


@pytest.fixture
def datanode_host(tmp_path):
    """A fake DataNode host: its conf dir, and a restart command that (re)starts a stand-in Java agent."""
    conf = tmp_path / "hadoop-conf"
    conf.mkdir()
    (conf / "hadoop-env.sh").write_text(HADOOP_ENV)
    (conf / "hdfs-site.xml").write_text(HDFS_SITE)
    socket_path = tmp_path / "run" / "dn.throttle" / "control.sock"
    pid_file = tmp_path / "stand-in.pid"
    restart = (f"kill $(cat {pid_file}) 2>/dev/null; (cd {REPO} && exec {sys.executable} -m tests.datanode.stand_in_agent "
               f"{socket_path} $VNODE_TEST_SKIP) >/dev/null 2>&1 & echo $! > {pid_file}")
    settings = {
        "vnode_common_installed_this_run": True,   # vnode_common's install is tested elsewhere; use this venv
        "vnode_common_venv": sys.prefix, "vnode_common_use_systemd": False,
        "vnode_common_run_dir": str(tmp_path / "run"),
        "vnode_datanode_dist": make_dist(tmp_path / "dist"),
        "vnode_datanode_jar_dir": str(tmp_path / "opt" / "lib"),
        "vnode_datanode_socket": str(socket_path), "vnode_datanode_conf_dir": str(conf),
        "vnode_datanode_user": pwd.getpwuid(os.getuid()).pw_name, "vnode_datanode_group": grp.getgrgid(os.getgid()).gr_name,
        "vnode_datanode_restart_command": ["sh", "-c", restart], "vnode_datanode_verify_seconds": 20,
        "vnode_datanode_verify_enforcing": False,
        "vnode_datanode_data_address": "",   # the stand-in serves no block transfers
    }
    try:
        yield tmp_path, settings
    finally:
        if pid_file.exists():
            subprocess.run(["sh", "-c", f"kill $(cat {pid_file})"], capture_output=True)


def run_role(tmp_path, settings: dict, *options: str, skip_hook: str = "") -> subprocess.CompletedProcess:
    (tmp_path / "vars.json").write_text(json.dumps(settings))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local",
                                                        "gather_facts": False, "roles": ["vnode_datanode"]}]))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_ROLES_PATH=ROLES,
               ANSIBLE_RETRY_FILES_ENABLED="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false", LC_ALL="C.UTF-8",
               VNODE_TEST_SKIP=f"--skip {skip_hook}" if skip_hook else "")
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", "ansible_python_interpreter=/usr/bin/python3",
                           "-e", f"@{tmp_path / 'vars.json'}", *options, str(tmp_path / "play.yml")],
                          capture_output=True, text=True, timeout=300, env=env)


def datanode_opts(hadoop_env) -> str:
    """HDFS_DATANODE_OPTS as a DataNode start sees it, with hadoop-env.sh read twice."""
    return subprocess.run(["bash", "-c", f". {hadoop_env}; . {hadoop_env}; echo \"$HDFS_DATANODE_OPTS\""],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_check_mode_changes_nothing_a_run_deploys_the_datanode_side_and_a_rerun_changes_nothing(datanode_host):
    tmp_path, settings = datanode_host
    conf = tmp_path / "hadoop-conf"
    jar = tmp_path / "opt" / "lib" / f"vnode-sync-datanode-throttle-{version()}.jar"

    dry = run_role(tmp_path, settings, "--check", "--diff")
    assert dry.returncode == 0, dry.stdout[-4000:] + dry.stderr[-2000:]
    assert recap(dry.stdout)["changed"] > 0 and "-javaagent:" in dry.stdout   # the diff shows what would change
    assert (conf / "hadoop-env.sh").read_text() == HADOOP_ENV and (conf / "hdfs-site.xml").read_text() == HDFS_SITE
    assert not jar.exists()

    first = run_role(tmp_path, settings)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    assert jar.read_bytes() == (tmp_path / "dist" / jar.name).read_bytes()
    env = (conf / "hadoop-env.sh").read_text()
    assert env.startswith(HADOOP_ENV), "the site's lines are kept as they were"
    socket_path = settings["vnode_datanode_socket"]
    assert datanode_opts(conf / "hadoop-env.sh") == f"-Xmx1g -javaagent:{jar}=socket={socket_path}"
    site = (conf / "hdfs-site.xml").read_text()
    assert site == HDFS_SITE.replace("<value>false</value>", "<value>true</value>"), site
    assert oct(os.stat(os.path.dirname(socket_path)).st_mode & 0o777) == "0o700"
    # The handler restarted the DataNode and waited for its agent's handshake.
    assert "RUNNING HANDLER [vnode_datanode : Restart the DataNode" in first.stdout
    assert readiness(socket_path, 2.0)[0] == READY

    second = run_role(tmp_path, settings)
    assert second.returncode == 0, second.stdout[-4000:]
    assert recap(second.stdout)["changed"] == 0, second.stdout[-4000:]
    assert "RUNNING HANDLER" not in second.stdout
    assert (conf / "hadoop-env.sh").read_text() == env and (conf / "hdfs-site.xml").read_text() == site

    # Every run ends by checking the agent: a DataNode that lost it fails the run (after the retries), naming the socket.
    subprocess.run(["sh", "-c", f"kill $(cat {tmp_path / 'stand-in.pid'})"], check=True)
    gone = run_role(tmp_path, {**settings, "vnode_datanode_verify_seconds": 1})
    assert gone.returncode != 0 and recap(gone.stdout)["changed"] == 0
    assert f"DataNode throttle socket {socket_path}: Connection refused" in gone.stdout, gone.stdout[-3000:]


def set_property(tmp_path, path, name: str, value: str, check_mode: bool = False) -> dict:
    """The role's hdfs-site.xml module, run as Ansible runs it (its arguments in a file), without a play."""
    args = tmp_path / "module-args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"path": str(path), "name": name, "value": value,
                                                        "_ansible_check_mode": check_mode}}))
    done = subprocess.run(["/usr/bin/python3", os.path.join(ROLES, "vnode_datanode", "library", "hadoop_site_property.py"),
                           str(args)], capture_output=True, text=True, timeout=60)
    return json.loads(done.stdout)


def test_the_hdfs_site_module_adds_a_missing_property_and_refuses_a_file_that_is_not_xml(tmp_path):
    without = HDFS_SITE.replace("""  <property>
    <name>dfs.block.access.token.enable</name>
    <value>false</value>
  </property>
""", "")
    site = tmp_path / "hdfs-site.xml"
    site.write_text(without)
    assert set_property(tmp_path, site, "dfs.block.access.token.enable", "true", check_mode=True)["changed"]
    assert site.read_text() == without
    assert set_property(tmp_path, site, "dfs.block.access.token.enable", "true")["changed"]
    assert site.read_text() == without.replace("</configuration>", """  <property>
    <name>dfs.block.access.token.enable</name>
    <value>true</value>
  </property>
</configuration>""")
    assert not set_property(tmp_path, site, "dfs.block.access.token.enable", "true")["changed"]

    site.write_text("<configuration><property>")
    refused = set_property(tmp_path, site, "dfs.block.access.token.enable", "true")
    assert refused["failed"] and refused["msg"].startswith(f"{site}: ") and "\n" not in refused["msg"]
    assert site.read_text() == "<configuration><property>"


def test_a_jar_that_does_not_match_sha256sums_is_refused_and_nothing_changes(datanode_host):
    tmp_path, settings = datanode_host
    settings["vnode_datanode_dist"] = make_dist(tmp_path / "tampered", tamper=True)
    done = run_role(tmp_path, settings)
    assert done.returncode != 0
    assert "its sha256 differs from SHA256SUMS" in done.stdout, done.stdout[-3000:]
    assert (tmp_path / "hadoop-conf" / "hadoop-env.sh").read_text() == HADOOP_ENV
    assert (tmp_path / "hadoop-conf" / "hdfs-site.xml").read_text() == HDFS_SITE
    assert not (tmp_path / "opt" / "lib").exists()


def test_a_datanode_whose_agent_leaves_a_required_hook_unwoven_stops_the_play_naming_it(datanode_host):
    tmp_path, settings = datanode_host
    done = run_role(tmp_path, settings, skip_hook="BlockReceiver.receiveBlock")
    assert done.returncode != 0
    assert "hook BlockReceiver.receiveBlock not_found: writes are not held to their ceilings" in done.stdout, \
        done.stdout[-3000:]
    # It failed at the first answer, not after vnode_datanode_verify_seconds of retries.
    assert "FAILED - RETRYING" not in done.stdout.split("Wait until the DataNode's Java agent")[-1]


def test_the_storage_agents_datanode_throttle_section_names_the_javaagent_socket(tmp_path):
    """Both roles in one play, as site.yml runs them on DataNodes: the storage agent's config, rendered by its
    role's template with both roles' defaults, loads with backend datanode-throttle and the role's socket."""
    socket_path = "/run/vnode-sync/datanode.throttle/control.sock"
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "roles": [{"role": "vnode_datanode", "when": False}, {"role": "vnode_storage_agent", "when": False}],
             "tasks": [{"name": "render the storage agent config", "ansible.builtin.template": {
                 "src": os.path.join(ROLES, "vnode_storage_agent", "templates", "storage-agent.yaml.j2"),
                 "dest": str(tmp_path / "storage-agent.yaml")}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_ROLES_PATH=ROLES, ANSIBLE_LOCALHOST_WARNING="false")
    done = subprocess.run(["ansible-playbook", "-i", "localhost,", "-e", "vnode_common_coordinator_host=localhost",
                           str(tmp_path / "play.yml")], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-3000:]
    config = load_agent_config(str(tmp_path / "storage-agent.yaml"))
    assert config.backend == "datanode-throttle" and config.datanode_throttle.socket == socket_path


def test_site_yml_restarts_datanodes_one_at_a_time_with_the_storage_agent_and_passes_a_syntax_check():
    with open(os.path.join(ANSIBLE_DIR, "site.yml")) as f:
        (play,) = [p for p in yaml.safe_load(f) if p["hosts"] == "vnode_datanode"]
    assert play["serial"] == 1 and play["roles"] == ["vnode_storage_agent", "vnode_datanode"]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_ROLES_PATH=ROLES)
    check = subprocess.run(["ansible-playbook", "--syntax-check", "-i", "inventory.example.yml", "site.yml"],
                           capture_output=True, text=True, timeout=120, env=env, cwd=ANSIBLE_DIR)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
