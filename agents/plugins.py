"""Choosing the enforcement backend and the handler-discovery plug-in from the agent config."""

from vnode_sync.agents.config import AgentConfig
from vnode_sync.agents.handlers.base import HandlerDiscovery
from vnode_sync.agents.handlers.generic import GenericDiscovery
from vnode_sync.agents.handlers.hdfs import HdfsDiscovery
from vnode_sync.errors import Unsupported
from vnode_sync.kernel.backend import HostCgroups, LimitEnforcer
from vnode_sync.kernel.blkio_v1 import BlkioV1Backend
from vnode_sync.kernel.io_v2 import IoV2Backend

# kind -> plug-in; its settings class (agents/config.py DISCOVERY_KINDS) names its arguments.
DISCOVERY_PLUGINS = {"generic": GenericDiscovery, "hdfs": HdfsDiscovery}


def make_backend(config: AgentConfig) -> LimitEnforcer:
    host = HostCgroups(config.cgroup_root)
    kind = config.backend
    if kind == "datanode-throttle":
        from vnode_sync.datanode.backend import DataNodeThrottleBackend
        from vnode_sync.datanode.channel import ThrottleChannel
        from vnode_sync.datanode.cpu_shares import CpuShares
        from vnode_sync.kernel.devices import device_number
        settings = config.datanode_throttle
        cpu = CpuShares(settings.socket, config.cgroup_subtree, host, config.proc_root) if settings.cpu_shares else None
        return DataNodeThrottleBackend(ThrottleChannel(settings.socket), [device_number(d) for d in config.devices],
                                       sharing=settings.sharing, cpu=cpu)
    if kind == "lustre-tbf":
        from vnode_sync.kernel.lustre_tbf import LustreTbfBackend
        return LustreTbfBackend.from_settings(config.cgroup_subtree, config.lustre)
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
    """The plug-in `discovery.kind` names, with the section's other keys (checked at load) as arguments."""
    settings = config.discovery
    return DISCOVERY_PLUGINS[settings.kind](proc_root=config.proc_root, **settings.model_dump(exclude={"kind"}))
