"""Every config kind refuses a file that is not UTF-8 or not a mapping, and a wrong-typed or
out-of-range value, in one line naming the file or key and the value; no traceback."""

import subprocess
import sys

import pytest

from vnode_sync.agents.plugins import make_discovery
from vnode_sync.agents.storage.config import load_agent_config
from vnode_sync.batch.settings import load_settings
from vnode_sync.coordinator.config import load_config
from vnode_sync.errors import ConfigError

LOADERS = {"coordinator": load_config, "storage agent": load_agent_config, "batch hooks": load_settings}


@pytest.mark.parametrize("kind", sorted(LOADERS))
@pytest.mark.parametrize("content,message", [
    (b"listen: \xff\xfe\n", "is not UTF-8 text"),
    (b"- a\n- b\n", "must hold a mapping at the top, not list"),
])
def test_bad_files_are_refused_in_one_line(tmp_path, kind, content, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as e:
        LOADERS[kind](str(path))
    assert message in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("discovery,message", [
    ({"kind": "hdfs", "poll_seconds": "fast"}, "discovery (hdfs).poll_seconds must be float (like 0.002), got 'fast'"),
    ({"kind": "hdfs", "poll_seconds": -1}, "discovery (hdfs).poll_seconds must be above 0, got -1"),
    ({"kind": "hdfs", "colour": "red"}, "unknown key(s) colour"),
])
def test_discovery_plugin_options_are_typed(tmp_path, discovery, message):
    import yaml
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump({"node_id": "n1", "discovery": discovery}))
    with pytest.raises(ConfigError) as e:
        make_discovery(load_agent_config(str(path)))
    assert message in str(e.value)


@pytest.mark.parametrize("module", ["vnode_sync.agents.main", "vnode_sync.coordinator.main"])
def test_processes_refuse_a_non_utf8_config_in_one_line(tmp_path, module):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"node_id: \xff\n")
    result = subprocess.run([sys.executable, "-m", module, "--config", str(path)], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "is not UTF-8 text" in result.stderr


def test_vnodectl_refuses_a_non_utf8_config_in_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"coordinator: \xff\n")
    result = subprocess.run([sys.executable, "-m", "vnode_sync.ctl.main", "--config", str(path), "users"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "is not UTF-8 text" in result.stderr


@pytest.mark.parametrize("compute,message", [
    ({"storage_endpoints": [":9866"], "connection_seconds": "fast"}, "compute.connection_seconds must be float, got 'fast'"),
    ({"storage_endpoints": [":9866"], "placement_seconds": 0}, "compute.placement_seconds must be above 0"),
    ({"storage_endpoints": [":9866"], "colour": "red"}, "unknown key(s) 'colour' in compute"),
])
def test_compute_settings_are_typed(compute, message):
    from vnode_sync.agents.compute.main import ComputeSettings
    with pytest.raises(ConfigError) as e:
        ComputeSettings.parse(compute)
    assert message in str(e.value)
