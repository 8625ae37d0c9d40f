"""`make dist` (scripts/dist.py): every artifact of the version, named by it, with checksums that verify;
the storage node's wheelhouse holds none of the coordinator's extra."""

import os
import subprocess
import sys
import tarfile
import tomllib

from tests.conftest import REPO, stand_in_jar

DIST = os.path.join(REPO, "scripts", "dist.py")
with open(os.path.join(REPO, "pyproject.toml"), "rb") as _f:
    VERSION = tomllib.load(_f)["project"]["version"]
COORDINATOR_ONLY = {"numpy", "numba", "llvmlite", "kazoo", "pure_sasl"}


def _dist(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, DIST, *args], capture_output=True, text=True, timeout=600)


def _projects(directory) -> set[str]:
    return {name.split("-")[0].lower() for name in os.listdir(directory) if name.endswith(".whl")}


def test_dist_builds_every_artifact_of_the_version_with_checksums_that_verify(tmp_path, product_wheel):
    out = tmp_path / "dist"
    run = _dist("--out", str(out), "--wheel", product_wheel, "--jar", str(stand_in_jar(tmp_path, VERSION)))
    assert run.returncode == 0, run.stderr

    assert {p for p in os.listdir(out) if not p.startswith(".")} == {
        os.path.basename(product_wheel), f"vnode-sync-datanode-throttle-{VERSION}.jar",
        f"vnode-sync-ansible-{VERSION}.tar.gz", "wheelhouse", "SHA256SUMS"}
    assert os.path.basename(product_wheel).startswith(f"vnode_sync-{VERSION}-")
    node, coordinator = _projects(out / "wheelhouse" / "node"), _projects(out / "wheelhouse" / "coordinator")
    assert {"grpcio", "protobuf", "pyyaml", "pydantic", "cryptography"} <= node
    assert not node & COORDINATOR_ONLY, "a storage node's wheelhouse holds the coordinator's extra"
    assert COORDINATOR_ONLY <= coordinator and node <= coordinator
    with tarfile.open(out / f"vnode-sync-ansible-{VERSION}.tar.gz") as tar:
        names = tar.getnames()
    assert f"vnode-sync-ansible-{VERSION}/site.yml" in names
    assert f"vnode-sync-ansible-{VERSION}/roles/vnode_common/tasks/install.yml" in names

    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == 3 + len(node) + len(coordinator)
    check = subprocess.run(["sha256sum", "--check", "--strict", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    for size_line in (f"vnode-sync-datanode-throttle-{VERSION}.jar", "wheelhouse/node/", "in all"):
        assert size_line in run.stdout

    # A changed artifact no longer verifies.
    with open(out / f"vnode-sync-ansible-{VERSION}.tar.gz", "ab") as f:
        f.write(b"\0")
    assert subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=out,
                          capture_output=True).returncode != 0


def test_dist_without_the_jar_stops_in_one_line_and_makes_nothing(tmp_path, product_wheel):
    out = tmp_path / "dist"
    run = _dist("--out", str(out), "--wheel", product_wheel, "--jar", str(tmp_path / "absent.jar"))
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert "no DataNode agent jar" in line and "datanode-throttle.sh" in line
    assert not out.exists()


def test_dist_refuses_a_jar_of_another_version_in_one_line_and_makes_nothing(tmp_path, product_wheel):
    out = tmp_path / "dist"
    run = _dist("--out", str(out), "--wheel", product_wheel, "--jar", str(stand_in_jar(tmp_path, "0.0.9")))
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    assert f"is version 0.0.9, not {VERSION}" in line and "pom.xml" in line
    assert not out.exists()

