"""The Hadoop runtime the testbed runs: the cached jars of one Hadoop line, JVM flags, and the
client tool (VnodeSyncHdfsStream.java beside this file) compiled once per source and Hadoop version.

The supported lines are listed in deploy/hadoop/lines.txt (the first is the default); a run picks
one with `HdfsCluster(hadoop_version=...)`, `up --hadoop-version`, or for everything it starts
the environment variable VNODE_SYNC_HADOOP_VERSION."""

import contextlib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass

from vnode_sync.errors import InvalidArgument, NotFound


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINES_FILE = os.path.join(REPO, "deploy", "hadoop", "lines.txt")


def supported_lines() -> tuple[str, ...]:
    """The Hadoop versions setup fetches and the e2e tests run against, newest first;
    $VNODE_SYNC_HADOOP_LINES ("3.2.4 2.10.2") replaces the list, e.g. to try an older line."""
    if os.environ.get("VNODE_SYNC_HADOOP_LINES", "").strip():
        return tuple(os.environ["VNODE_SYNC_HADOOP_LINES"].split())
    with open(LINES_FILE) as f:
        return tuple(line.strip() for line in f if line.strip() and not line.startswith("#"))


HADOOP_LINES = supported_lines()
HADOOP_VERSION = HADOOP_LINES[0]  # the default line
TOOL_CLASS = "VnodeSyncHdfsStream"
TOOL_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{TOOL_CLASS}.java")
NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"


def datanode_throttle_jar() -> str:
    """vnode-sync's Java agent for DataNodes, built by scripts/setup.d/datanode-throttle.sh."""
    jar = os.path.join(REPO, "agents", "datanode-throttle", "target", "vnode-sync-datanode-throttle.jar")
    if not os.path.exists(jar):
        raise NotFound(f"no {jar}; run scripts/setup.d/datanode-throttle.sh")
    project = os.path.join(REPO, "agents", "datanode-throttle")
    built = os.path.getmtime(jar)
    for directory, _, files in os.walk(os.path.join(project, "src", "main")):
        for name in files:
            if os.path.getmtime(os.path.join(directory, name)) > built:
                # A test run against the previous build would measure code that is no longer there.
                raise NotFound(f"{jar} is older than {os.path.join(directory, name)}; "
                               f"run scripts/setup.d/datanode-throttle.sh")
    return jar


def hadoop_version(version: str | None = None) -> str:
    """VERSION, else $VNODE_SYNC_HADOOP_VERSION, else the default line; checked to be a version number
    (it names a directory)."""
    chosen = version or os.environ.get("VNODE_SYNC_HADOOP_VERSION") or HADOOP_VERSION
    if not re.fullmatch(r"\d+\.\d+\.\d+", chosen):
        raise InvalidArgument(f"Hadoop version {chosen!r} is not like 3.4.2")
    return chosen


def hadoop_cache() -> str:
    """Where setup.d/hdfs.sh puts each line's jars: readable by every uid, since clients run as other users."""
    if "VNODE_SYNC_HADOOP_CACHE" in os.environ:
        return os.environ["VNODE_SYNC_HADOOP_CACHE"]
    if os.geteuid() == 0:
        return "/var/cache/vnode-sync"
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "vnode-sync")


def hadoop_home(version: str | None = None) -> str:
    """The cache dir of one Hadoop line (default: hadoop_version())."""
    return os.path.join(hadoop_cache(), f"hadoop-{hadoop_version(version)}")


NATIVE_FILE = os.path.join(REPO, "deploy", "hadoop", "native.txt")


def native_dir() -> str:
    """Where setup.d/hdfs.sh put libhadoop.so (deploy/hadoop/native.txt): short-circuit reads need it."""
    with open(NATIVE_FILE) as f:
        artifact = next(line.strip() for line in f if line.strip() and not line.startswith("#"))
    return os.path.join(hadoop_cache(), f"hadoop-native-{artifact.rsplit(':', 1)[1]}")


def has_native() -> bool:
    return os.path.exists(os.path.join(native_dir(), "libhadoop.so"))


def has_jars(version: str | None = None) -> bool:
    version = hadoop_version(version)
    return os.path.exists(os.path.join(hadoop_home(version), "jars", f"hadoop-hdfs-{version}.jar"))


JVM_ROOT = "/usr/lib/jvm"


@dataclass(frozen=True)
class JavaRuntime:
    """One installed Java runtime (a JRE or JDK home) and its feature version: 8, 11, 17."""

    home: str
    feature: int

    @property
    def java(self) -> str:
        return os.path.join(self.home, "bin", "java")

    @classmethod
    def at(cls, home: str) -> "JavaRuntime":
        """The runtime in HOME, its version from HOME/release (JAVA_VERSION="11.0.24" or "1.8.0_412")."""
        home = os.path.realpath(home)
        if not os.access(os.path.join(home, "bin", "java"), os.X_OK):
            raise NotFound(f"no Java runtime in {home}: no bin/java")
        try:
            with open(os.path.join(home, "release")) as f:
                found = re.search(r'^JAVA_VERSION="(1\.)?(\d+)', f.read(), re.M)
        except OSError as e:
            raise NotFound(f"no Java runtime in {home}: {e}") from e
        if not found:
            raise NotFound(f"no JAVA_VERSION in {home}/release")
        return cls(home, int(found.group(2)))


def default_java() -> JavaRuntime:
    """The runtime of `java` on PATH, which the testbed starts every JVM on unless told otherwise."""
    java = shutil.which("java")
    if not java:
        raise NotFound("no java on PATH; the HDFS testbed needs a Java 17 JDK")
    return JavaRuntime.at(os.path.dirname(os.path.dirname(os.path.realpath(java))))


def installed_java(feature: int, root: str = JVM_ROOT) -> JavaRuntime | None:
    """An installed runtime of that feature version under ROOT (11: scripts/setup.d/java11.sh's), or None."""
    for home in sorted(glob.glob(os.path.join(root, "*"))):
        if os.path.islink(home):
            continue  # Debian's java-1.17.0-openjdk-amd64 and the like name a home already listed
        with contextlib.suppress(NotFound):
            runtime = JavaRuntime.at(home)
            if runtime.feature == feature:
                return runtime
    return None


@dataclass(frozen=True)
class JvmSettings:
    """Flags of every JVM the testbed starts, daemons and clients."""

    heap_mb: int = 256  # NameNode and DataNodes with a few clients stay near 200 MB RSS
    # C1 only: three JVMs starting on 2 cores need less CPU (startup 9-14 s against 12-25 s);
    # read and write rates were within this shared machine's noise of full tiered compilation.
    quick_jit: bool = True
    ipv4_stack: bool = True  # what bin/hdfs passes (hadoop-functions.sh); False: dual-stack, /proc/net/tcp6
    extra: tuple[str, ...] = ()

    def flags(self, feature: int = 17) -> list[str]:
        """For a JVM of that feature version (the testbed's default `java` is a 17)."""
        flags = [f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC"]
        if feature >= 9:
            # Java 17 closes java.lang to Hadoop's reflection (WebHDFS answers 500 without it); 9 to 16
            # accept the flag; Java 8 has no modules and would refuse to start with it.
            flags.append("--add-opens=java.base/java.lang=ALL-UNNAMED")
        if self.quick_jit:
            flags.append("-XX:TieredStopAtLevel=1")
        if self.ipv4_stack:
            flags.append("-Djava.net.preferIPv4Stack=true")
        return flags + list(self.extra)


@dataclass(frozen=True)
class HadoopRuntime:
    """One Hadoop line's jars, the empty webapps and the compiled client tool, all under one cache dir."""

    home: str
    version: str

    @classmethod
    def of(cls, version: str | None = None) -> "HadoopRuntime":
        version = hadoop_version(version)
        return cls(hadoop_home(version), version)

    @property
    def jars(self) -> str:
        return os.path.join(self.home, "jars")

    @property
    def web(self) -> str:
        return os.path.join(self.home, "web")

    @property
    def namespace_template(self) -> str:
        return os.path.join(self.home, "namespace-template")

    def prepare(self) -> None:
        """Check the jars and java are there; make the webapps dirs and the client tool if missing."""
        if not os.path.exists(os.path.join(self.jars, f"hadoop-hdfs-{self.version}.jar")):
            raise NotFound(f"no Hadoop {self.version} jars in {self.jars}; run scripts/setup.d/hdfs.sh "
                           f"(VNODE_SYNC_HADOOP_LINES={self.version} for a line not in {LINES_FILE})")
        if not shutil.which("java") or not shutil.which("javac"):
            raise NotFound("no java or javac on PATH; the HDFS testbed needs a Java 17 JDK")
        for app in ("hdfs", "datanode", "static"):
            os.makedirs(os.path.join(self.web, "webapps", app), exist_ok=True)
        self.tool_jar()

    def client_class_archive(self, java: JavaRuntime) -> str:
        """Where the client JVMs' class-data archive (CDS) is kept: beside the tool's jar (a classpath entry it
        was made with), named by the Java build (HOME/release) and the jars (their dir's mtime)."""
        with open(os.path.join(java.home, "release"), "rb") as f:
            key = f.read() + str(os.stat(self.jars).st_mtime_ns).encode()
        return os.path.join(self.tool_dir(), f"client-{hashlib.sha256(key).hexdigest()[:12]}.jsa")

    def tool_jar(self) -> str:
        """The client tool's classes in a jar: a class-data archive takes no class from a directory on the
        classpath. Made once; the first one made stays (an archive names its classpath's jars by mtime)."""
        directory = self.tool_dir()
        jar = os.path.join(directory, "tool.jar")
        if os.path.exists(jar):
            return jar
        staging = f"{jar}.{os.getpid()}.partial"
        with zipfile.ZipFile(staging, "w") as z:
            for name in sorted(os.listdir(directory)):
                if name.endswith(".class"):
                    z.write(os.path.join(directory, name), name)
        os.chmod(staging, 0o644)
        with contextlib.suppress(FileExistsError):
            os.link(staging, jar)
        os.unlink(staging)
        return jar

    def tool_dir(self) -> str:
        """Compile the client tool once per source version (about 2 s); later calls just return its dir."""
        with open(TOOL_SOURCE) as f:
            source_text = f.read()
        digest = hashlib.sha256(source_text.encode()).hexdigest()[:12]
        target = os.path.join(self.home, "tools", digest)
        if os.path.exists(os.path.join(target, f"{TOOL_CLASS}.class")):
            return target
        os.makedirs(os.path.dirname(target), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=f"{digest}.", dir=os.path.dirname(target))
        try:
            source = os.path.join(staging, f"{TOOL_CLASS}.java")
            with open(source, "w") as f:
                f.write(source_text)
            subprocess.run(["javac", "-nowarn", "-cp", f"{self.jars}/*", "-d", staging, source],
                           check=True, capture_output=True, text=True)
            os.chmod(staging, 0o755)
            with contextlib.suppress(OSError):  # a concurrent compile won the race: use that one
                os.rename(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return target
