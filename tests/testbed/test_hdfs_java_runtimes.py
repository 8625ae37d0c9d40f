"""The Java runtimes the HDFS testbed can start DataNodes on: found by the version their home declares,
and given only the flags that runtime accepts."""

import os

import pytest

from testbed.hdfs_cluster import HdfsCluster, JavaRuntime, JvmSettings, installed_java
from vnode_sync.errors import NotFound

ADD_OPENS = "--add-opens=java.base/java.lang=ALL-UNNAMED"


def fake_home(root, name: str, release: str | None) -> str:
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    if release is not None:
        (home / "release").write_text(release)
    return str(home)


def test_a_runtime_is_known_by_the_java_version_its_home_declares(tmp_path):
    assert JavaRuntime.at(fake_home(tmp_path, "jdk8", 'JAVA_VERSION="1.8.0_412"\n')).feature == 8
    eleven = JavaRuntime.at(fake_home(tmp_path, "jre11", 'IMPLEMENTOR="Debian"\nJAVA_VERSION="11.0.24"\n'))
    assert (eleven.feature, eleven.java) == (11, str(tmp_path / "jre11" / "bin" / "java"))
    with pytest.raises(NotFound, match="release"):
        JavaRuntime.at(fake_home(tmp_path, "bare", None))
    with pytest.raises(NotFound, match="no bin/java"):
        JavaRuntime.at(str(tmp_path / "nothing"))


def test_the_installed_runtime_of_a_version_is_found_and_a_missing_one_is_none(tmp_path):
    fake_home(tmp_path, "java-11-openjdk-amd64", 'JAVA_VERSION="11.0.24"\n')
    fake_home(tmp_path, "java-17-openjdk-amd64", 'JAVA_VERSION="17.0.15"\n')
    os.symlink(tmp_path / "java-17-openjdk-amd64", tmp_path / "default-java")
    assert installed_java(11, root=str(tmp_path)).home == str(tmp_path / "java-11-openjdk-amd64")
    assert installed_java(17, root=str(tmp_path)).home == str(tmp_path / "java-17-openjdk-amd64")
    assert installed_java(8, root=str(tmp_path)) is None


def test_only_a_runtime_with_modules_gets_add_opens():
    """Java 8 refuses to start with an option it does not know; 9 to 16 accept it, 17 needs it."""
    assert ADD_OPENS not in JvmSettings().flags(8)
    assert ADD_OPENS in JvmSettings().flags(11) and ADD_OPENS in JvmSettings().flags()


def test_a_datanode_runtime_that_is_not_there_is_refused_before_anything_is_made(tmp_path):
    workdir = tmp_path / "cluster"
    with pytest.raises(NotFound, match="no bin/java"):
        HdfsCluster("jvm", workdir=str(workdir), datanode_java_home=str(tmp_path / "no-such-jre"))
    assert not workdir.exists()
