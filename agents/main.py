"""vnode-agent: enforce the coordinator's shares on this node (storage role) or place jobs (compute role)."""

import argparse
import atexit
import logging
import signal
import sys

import grpc

from vnode_sync.agents.config import AgentConfig, load_agent_config
from vnode_sync.agents.plugins import make_backend, make_discovery
from vnode_sync.agents.storage.agent import StorageAgent
from vnode_sync.agents.storage.node_lock import hold_node_lock
from vnode_sync.distribution import version
from vnode_sync.errors import InvalidSetting, NotFound, VNodeSyncError
from vnode_sync.kernel.devices import device_number
from vnode_sync.kernel.fast_moves import FastMoves
from vnode_sync.kernel.types import DeviceNumber
from vnode_sync.logs import configure
from vnode_sync.metrics.settings import endpoint_tls
from vnode_sync.security.tls import secure_channel, tls_for_coordinator
from vnode_sync.supervision import EXIT_LOOP_FAILED
from vnode_sync.wire.leader import dial

log = logging.getLogger(__name__)


def _block_devices(path: str, config: AgentConfig) -> dict[str, DeviceNumber]:
    """The config's devices (and Lustre targets) as MAJ:MIN, checked before anything is made;
    one that is not a block device here is refused like any other bad value in the file."""
    keyed = {f"devices[{i}]": device for i, device in enumerate(config.devices)}
    if config.backend == "lustre-tbf":
        keyed.update({f"lustre.targets.{ost}": device for ost, device in config.lustre.targets.items()})
    numbers = {}
    for key, device in keyed.items():
        try:
            numbers[device] = device_number(device)
        except NotFound as e:
            raise InvalidSetting(path, key, repr(device), f"a block device on this host ({e})") from e
    return {device: numbers[device] for device in config.devices}


class AgentMetrics:
    """The endpoint is bound when the config is read (a taken address refuses at start, in one line);
    it serves once the agent exists. Made only for a config with a metrics section, and imported only
    then: prometheus_client (with http.server) takes seconds to load on a slow CPU."""

    def __init__(self, config: AgentConfig):
        from prometheus_client import CollectorRegistry
        from vnode_sync.metrics.endpoint import MetricsEndpoint

        self.config = config
        self.registry = CollectorRegistry()
        self.endpoint = MetricsEndpoint(config.metrics.listen, self.registry,
                                        endpoint_tls(config.metrics, config.security))

    def serve(self, collector) -> None:
        from prometheus_client import ProcessCollector

        self.registry.register(collector)
        ProcessCollector(registry=self.registry)
        self.endpoint.start()
        log.info("metrics at %s://%s/metrics", self.endpoint.scheme, self.endpoint.address)

    def stop(self) -> None:
        self.endpoint.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vnode-agent", description=__doc__)
    parser.add_argument("--config", required=True, help="agent YAML file")
    parser.add_argument("--teardown", action="store_true",
                        help="remove this agent's VNodes (threads go back to the root cgroup) and exit")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    args = parser.parse_args(argv)
    try:
        config = load_agent_config(args.config)
        devices = {} if args.teardown else _block_devices(args.config, config)
        configure(f"agent {config.node_id}", config.log_format)
        if config.role == "storage":   # held until the process ends (see node_lock)
            atexit.register(hold_node_lock(config.run_dir, config.cgroup_subtree, config.node_id).release)
        metrics = AgentMetrics(config) if config.metrics is not None and not args.teardown else None
        if config.role == "compute":
            from vnode_sync.agents.compute.main import run_compute_agent
            from vnode_sync.agents.compute.metrics import ComputeAgentCollector
            files = tls_for_coordinator(config.security, config.coordinator, f"compute {config.node_id}", log)
            channel = dial(config.coordinator,
                           lambda one: secure_channel(one, files) if files else grpc.insecure_channel(one))
            try:
                return run_compute_agent(config, channel, lambda agent: metrics and metrics.serve(
                    ComputeAgentCollector(agent)))
            finally:
                if metrics:
                    metrics.stop()
        backend = make_backend(config)
        if args.teardown:
            backend.teardown()
            FastMoves(config.fast_moves_mountpoint).disable()
            print(f"removed VNodes of {config.node_id} ({backend.name})")
            return 0
        discovery = make_discovery(config)
        tls = tls_for_coordinator(config.security, config.coordinator, f"node {config.node_id}", log)
    except VNodeSyncError as e:
        print(f"vnode-agent: error: {e}", file=sys.stderr)
        return 2
    agent = StorageAgent(config, backend, discovery, devices, tls)
    if metrics:
        from vnode_sync.agents.storage.metrics import CaptureTimer, StorageAgentCollector

        agent.reconciler.on_first_placement(CaptureTimer(metrics.registry, config.node_id, config.proc_root).placed)
        metrics.serve(StorageAgentCollector(agent))
    fast_moves = FastMoves(config.fast_moves_mountpoint)
    if config.fast_thread_moves and (backend.placer is not None or getattr(backend, "cpu", None) is not None):
        try:
            log.info("fast thread moves (cgroup favordynmods): %s", fast_moves.enable())
        except VNodeSyncError as e:
            log.warning("fast thread moves unavailable, each capture waits for an RCU grace period: %s", e)
    for note in backend.limitations():
        log.info("%s backend limitation: %s", backend.name, note)
    if backend.placer is not None and not backend.placer.places_threads and discovery.shared_process:
        log.warning("%s places whole processes and every %s process serves all users: this agent sets "
                    "VNode limits but moves no %s process; per-user enforcement needs a per-thread "
                    "backend (blkio-v1) or one inside the server", backend.name, discovery.name, discovery.name)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    log.info("node %s: backend %s, cgroup subtree %s, discovery %s, coordinator %s", config.node_id,
             backend.name, config.cgroup_subtree, discovery.name, config.coordinator)
    # Not a daemon: the main thread waits for the agent's teardown.
    worker = agent.loops.start_thread("reconcile", agent.run, daemon=False)
    try:
        while worker.is_alive():
            worker.join(0.5)
    finally:
        fast_moves.disable()
        if metrics:
            metrics.stop()
    if agent.failure:
        return EXIT_LOOP_FAILED
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
