"""Choosing the enforcement backend and the handler-discovery plug-in from the agent config."""

import importlib
import inspect

from vnode_sync.agents.handlers.base import HandlerDiscovery
from vnode_sync.agents.storage.config import AgentConfig
from vnode_sync.errors import ConfigError, Unsupported
from vnode_sync.kernel.backend import HostCgroups, LimitEnforcer
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.io_v2 import IoV2Backend

DISCOVERY_PLUGINS = {
    "generic": "vnode_sync.agents.handlers.generic:GenericDiscovery",
    "hdfs": "vnode_sync.agents.handlers.hdfs:HdfsDiscovery",
}


def make_backend(config: AgentConfig) -> LimitEnforcer:
    host = HostCgroups(config.cgroup_root)
    kind = config.backend
    if kind == "datanode-throttle":
        from vnode_sync.datanode.backend import DataNodeThrottleBackend
        from vnode_sync.datanode.channel import ThrottleChannel
        from vnode_sync.kernel.devices import device_number
        return DataNodeThrottleBackend(ThrottleChannel(config.datanode_throttle_socket),
                                       [device_number(d) for d in config.devices])
    if kind == "lustre-tbf":
        from vnode_sync.kernel.lustre_tbf import LustreTbfBackend
        return LustreTbfBackend.from_config(config.cgroup_subtree, config.lustre)
    if kind in ("auto", "blkio-v1") and host.has_blkio_v1():
        return BlkioV1Backend(host.blkio_v1, config.cgroup_subtree)
    if kind == "blkio-v1":
        raise Unsupported(f"backend blkio-v1: no cgroup v1 blkio hierarchy at {host.blkio_v1}")
    mount = host.v2_mount()
    if mount is not None:
        return IoV2Backend(mount, config.cgroup_subtree)
    raise Unsupported(f"backend {kind}: neither cgroup v1 blkio nor a cgroup v2 mount with the io "
                      f"controller under {config.cgroup_root}")


def make_discovery(config: AgentConfig) -> HandlerDiscovery:
    settings = dict(config.discovery)
    kind = settings.pop("kind", "generic")
    if kind not in DISCOVERY_PLUGINS:
        raise ConfigError(f"discovery.kind {kind!r} is not one of {', '.join(DISCOVERY_PLUGINS)}")
    module_name, class_name = DISCOVERY_PLUGINS[kind].split(":")
    plugin = getattr(importlib.import_module(module_name), class_name)
    parameters = inspect.signature(plugin).parameters
    accepted = set(parameters) - {"proc_root"}
    unknown = set(settings) - accepted
    if unknown:
        raise ConfigError(f"discovery ({kind}): unknown key(s) {', '.join(sorted(unknown))}; "
                          f"allowed: {', '.join(sorted(accepted))}")
    for key, value in settings.items():
        settings[key] = _typed_like_default(f"discovery ({kind})", key, value, parameters[key].default)
    return plugin(proc_root=config.proc_root, **settings)


def _typed_like_default(section: str, key: str, value, default):
    """A plug-in option has the type of its default (int is accepted where a float is)."""
    if default is inspect.Parameter.empty or default is None:
        return value
    kind = type(default)
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ConfigError(f"{section}.{key} must be {kind.__name__} (like {default!r}), got {value!r}")
    if kind in (int, float) and value <= 0 < default:
        raise ConfigError(f"{section}.{key} must be above 0, got {value!r}")
    return value
