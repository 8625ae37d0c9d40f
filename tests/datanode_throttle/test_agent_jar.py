"""The built agent jar on the JVMs sites run DataNodes on (Hadoop 3.3 and 3.4: Java 8 and 11; 17 here
besides): bytecode a Java 8 loads, the product's version in its manifest and handshake, and the agent
starting and weaving every hook on each installed runtime, in a JVM with Hadoop's jars and no HDFS."""

import os
import struct
import subprocess
import time
import xml.etree.ElementTree as ET
import zipfile

import pytest

from tests.conftest import REPO, needs_java
from testbed.hdfs_cluster import HadoopRuntime, hadoop_version, has_jars, installed_java
from testbed.processes import stop_process
from vnode_sync.datanode.channel import OPTIONAL_HOOKS, REQUIRED_HOOKS, ThrottleChannel
from vnode_sync.errors import Unavailable

PROJECT = os.path.join(REPO, "agents", "datanode-throttle")
JAR = os.path.join(PROJECT, "target", "vnode-sync-datanode-throttle.jar")
JAVA_8_MAJOR = 52  # class-file major version: Java N writes 44 + N
needs_jar = pytest.mark.skipif(not os.path.exists(JAR), reason=f"needs {JAR}; run scripts/setup.d/datanode-throttle.sh")

pytestmark = [needs_jar]


def class_majors(jar: str) -> dict[str, int]:
    """Each .class entry's major version (bytes 6-7 after the 0xCAFEBABE magic)."""
    majors = {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.endswith(".class"):
                magic, _, major = struct.unpack(">IHH", z.read(name)[:8])
                assert magic == 0xCAFEBABE, name
                majors[name] = major
    return majors


def highest_allowed(entry: str) -> int:
    """A multi-release jar's META-INF/versions/N/ may hold Java N classes (N >= 9); the rest must load on 8."""
    parts = entry.split("/")
    if parts[:2] == ["META-INF", "versions"]:
        return 44 + int(parts[2])
    return JAVA_8_MAJOR


def manifest(jar: str) -> dict[str, str]:
    with zipfile.ZipFile(jar) as z:
        text = z.read("META-INF/MANIFEST.MF").decode()
    return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def pom_version() -> str:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    return ET.parse(os.path.join(PROJECT, "pom.xml")).getroot().find("m:version", ns).text


def test_every_class_in_the_jar_loads_on_java_8():
    """Ours (org/vnodesync/**, the relocated Byte Buddy with it) and JNA's: major 52 or lower."""
    majors = class_majors(JAR)
    ours = {name: major for name, major in majors.items() if name.startswith("org/vnodesync/")}
    assert "org/vnodesync/dnthrottle/Agent.class" in ours and len(ours) > 50, sorted(ours)[:5]
    too_new = {name: major for name, major in majors.items() if major > highest_allowed(name)}
    assert too_new == {}, f"{len(too_new)} classes need a JVM newer than Java 8: {sorted(too_new.items())[:10]}"


def test_the_manifest_carries_the_products_version_and_the_agents_entry_point():
    entries = manifest(JAR)
    assert entries["Implementation-Version"] == pom_version()
    assert entries["Premain-Class"] == "org.vnodesync.dnthrottle.Agent"


def idle_main(directory: str) -> str:
    """A main class that only sleeps, compiled for Java 8: the JVM the agent is loaded into."""
    source = os.path.join(directory, "Idle.java")
    with open(source, "w") as f:
        f.write("public class Idle { public static void main(String[] a) throws Exception "
                "{ Thread.sleep(Long.parseLong(a[0])); } }\n")
    subprocess.run(["javac", "--release", "8", "-d", directory, source], check=True, capture_output=True)
    return directory


def wait_for_hello(channel: ThrottleChannel, process: subprocess.Popen, log: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return channel.hello()
        except Unavailable:
            if process.poll() is not None or time.monotonic() > deadline:
                with open(log) as f:
                    raise AssertionError(f"no handshake on {channel.path}: {f.read()[-2000:]}") from None
            time.sleep(0.2)


@needs_java
@pytest.mark.skipif(not has_jars(), reason=f"needs the Hadoop {hadoop_version()} jars; run scripts/setup.d/hdfs.sh")
@pytest.mark.parametrize("feature", [8, 11, 17], ids=lambda f: f"java-{f}")
def test_the_agent_starts_weaves_every_hook_and_names_its_version_on_java(feature, tmp_path):
    """Hooked classes are loaded (not initialized) at start, so the handshake shows them woven without a
    DataNode; the control socket on 8 and 11 is libc's (JNA), on 17 the JDK's."""
    runtime = installed_java(feature)
    if runtime is None:
        pytest.skip(f"no Java {feature} runtime installed" + (
            " (none is reachable on this machine: --release 8 and the class-file check stand in)" if feature == 8
            else "; run scripts/setup.d/java11.sh"))
    classes = idle_main(str(tmp_path))
    socket_dir = tmp_path / "throttle"
    socket_dir.mkdir(mode=0o700)
    socket_path = str(socket_dir / "control.sock")
    log = str(tmp_path / "jvm.log")
    with open(log, "wb") as out:
        process = subprocess.Popen([runtime.java, f"-javaagent:{JAR}=socket={socket_path}", "-cp",
                                    f"{classes}:{HadoopRuntime.of().jars}/*", "Idle", "60000"],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        channel = ThrottleChannel(socket_path)
        hello = wait_for_hello(channel, process, log)
        assert os.path.realpath(f"/proc/{process.pid}/exe") == os.path.realpath(runtime.java)
        assert (hello.version, hello.hadoop) == (pom_version(), hadoop_version())
        assert hello.hooks == {hook: "woven" for hook in {**REQUIRED_HOOKS, **OPTIONAL_HOOKS}}
        assert channel.ping().startswith(f"vnode-sync-datanode-throttle {pom_version()} ")
        assert os.stat(socket_path).st_mode & 0o777 == 0o600
    finally:
        stop_process(process, grace_seconds=5)
