"""vnode-coordinator: serve users, priorities and shares to agents and admins."""

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading

from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import CoordinatorConfig, load_config
from vnode_sync.coordinator.fan_out.processes import FanOutCommand, listen_host
from vnode_sync.coordinator.heap import tune_for_streams
from vnode_sync.coordinator.commands.nss_groups import NssGroups
from vnode_sync.coordinator.commands.slurm_accounts import SlurmAccounts
from vnode_sync.coordinator.api.server import CoordinatorServer
from vnode_sync.coordinator.state.store import StateStore
from vnode_sync.coordinator.state.store_admin import STORE_COMMANDS, run_store_command
from vnode_sync.distribution import extra_refusal, version
from vnode_sync.errors import InvalidSetting, VNodeSyncError
from vnode_sync.logs import configure
from vnode_sync.metrics.settings import endpoint_tls
from vnode_sync.security.audit import send_audit_to
from vnode_sync.security.tls import INSECURE_WARNING, server_credentials
from vnode_sync.supervision import EXIT_LOOP_FAILED, run_passes_async

log = logging.getLogger(__name__)

JOB_EXPIRY_CHECK_SECONDS = 30.0
# Calls in flight get this long at SIGTERM; streams are ended at once (shutdown stays under 2 s).
STOP_GRACE_SECONDS = 1.0


def supervised(name: str, one_pass, every: float, run_pass):
    """A loop that runs `one_pass` (through `run_pass`, e.g. on the store thread) every `every` s,
    supervised: an error is logged with context and the pass retried with backoff; a loop that
    keeps failing fails the server, and the process exits EXIT_LOOP_FAILED."""

    async def timed_pass() -> float:
        await run_pass(one_pass)
        return every

    async def loop() -> None:
        await run_passes_async(name, "coordinator", timed_pass)

    loop.__name__ = name
    return loop


def source_refresh(name: str, source: NssGroups | SlurmAccounts, server, every: float):
    """Groups from NSS or Slurm every `every` s: getent or sacctmgr off the store thread (LDAP or slurmdbd
    may be slow), the changes on it."""
    async def read_then_apply(_source) -> None:
        found = await asyncio.get_running_loop().run_in_executor(None, source.read)
        await server.store_call(source.apply, found)
    return supervised(name, source, every, read_then_apply)


class CoordinatorMetrics:
    """The Prometheus registry, the RPC interceptor that feeds it and the /metrics endpoint. Made only
    for a config with a metrics section, and imported only then: prometheus_client (with http.server)
    takes seconds to load on a slow CPU."""

    def __init__(self, config: CoordinatorConfig):
        # The endpoint's module first: loading it turns off the `_created` series of the metrics made here.
        import vnode_sync.metrics.endpoint  # noqa: F401
        from prometheus_client import CollectorRegistry
        from vnode_sync.coordinator.api.metrics import RpcMetrics

        self.config = config
        self.registry = CollectorRegistry()
        self.rpc = RpcMetrics(self.registry)
        self.endpoint = None

    def bind(self) -> None:
        """Take the endpoint's address (after the gRPC one: a second coordinator refuses there first)."""
        from vnode_sync.metrics.endpoint import MetricsEndpoint

        self.endpoint = MetricsEndpoint(self.config.metrics.listen, self.registry,
                                        endpoint_tls(self.config.metrics, self.config.security))

    def serve(self, cluster: Cluster) -> None:
        from prometheus_client import ProcessCollector
        from vnode_sync.coordinator.api.metrics import CoordinatorCollector

        self.registry.register(CoordinatorCollector(cluster))
        ProcessCollector(registry=self.registry)
        self.endpoint.start()
        log.info("metrics at %s://%s/metrics", self.endpoint.scheme, self.endpoint.address)

    def stop(self) -> None:
        self.endpoint.stop()


def add_store_command_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store_command", nargs="?", choices=STORE_COMMANDS,
                        help="instead of serving: init (new store from the YAML), backup PATH, restore PATH")
    parser.add_argument("store_path", nargs="?", metavar="PATH", help="backup target or restore source")
    parser.add_argument("--force", action="store_true", help="init: replace an existing state file")


def store_command(args: argparse.Namespace) -> int:
    """Run an admin command on the state file (the coordinator must be stopped: the file is locked)."""
    try:
        config = load_config(args.config)
        if config.zookeeper is not None:
            raise InvalidSetting(args.config, "zookeeper", "a zookeeper section",
                                 f"none for `{args.store_command}`: it acts on the SQLite state file; with a "
                                 "zookeeper section the state is in ZooKeeper (docs/ha.md)")
        print(run_store_command(config, args.state_path or config.state_path, args.store_command,
                                args.store_path, args.force))
    except VNodeSyncError as e:
        print(f"vnode-coordinator: error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vnode-coordinator", description=__doc__)
    parser.add_argument("--config", required=True, help="coordinator YAML file")
    parser.add_argument("--listen", help="override the config's listen address (host:port)")
    parser.add_argument("--state-path", help="override the config's SQLite path")
    parser.add_argument("--print-port", action="store_true", help="print the bound port on stdout once serving")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    add_store_command_arguments(parser)
    args = parser.parse_args(argv)
    if args.store_command:
        return store_command(args)
    # Installed without vnode-sync[coordinator] (a storage node's form): one line now, not an ImportError
    # from deep in the weight step once a work-conserving policy or ZooKeeper first needs it.
    refusal = extra_refusal("coordinator", "vnode-coordinator")
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    ha = None
    try:
        config = load_config(args.config)
        configure("coordinator", config.log_format)
        if config.security.unset:
            raise InvalidSetting(args.config, "tls", "nothing", "a tls section {ca, cert, key}, or insecure: "
                                 "true (lab only); the coordinator refuses to serve plaintext otherwise")
        credentials = server_credentials(config.security.tls) if config.security.tls else None
        if config.audit_log:
            send_audit_to(config.audit_log)
        metrics = CoordinatorMetrics(config) if config.metrics is not None else None
        rpc_metrics = (metrics.rpc,) if metrics else ()
        if config.zookeeper is not None:   # imported only then: the single coordinator needs no ZooKeeper client
            from vnode_sync.coordinator.ha.campaign import HighAvailability
            ha = HighAvailability(config)
        # The addresses first: a second coordinator on them refuses before touching any state.
        server = CoordinatorServer(args.listen or config.listen, credentials,
                                   (*rpc_metrics, ha.gate) if ha else rpc_metrics)
        port = server.port
        if metrics:
            metrics.bind()
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        if ha is not None:
            ha.standby(server)
            log.info("standby on port %d; leader: %s", port, ha.election.leader() or "none yet")
            if args.print_port:
                print(port, flush=True)
            store = ha.lead(server, stop)
            if store is None:
                ha.close()
                server.stop(grace=0)
                return 0
        else:
            # The YAML seeds a new store only, in the step that makes it; afterwards the database is the truth.
            store = StateStore(args.state_path or config.state_path, seed_users=config.users)
        cluster = Cluster(config, store)
        # The job expiry pass runs on the store thread, in order with every other store call.
        fan_out = FanOutCommand(os.path.abspath(args.config), listen_host(args.listen or config.listen),
                                config.fan_out_processes)
        background = [supervised("job-expiry", cluster.commands.expire_jobs, JOB_EXPIRY_CHECK_SECONDS, server.store_call)]
        if config.nss_groups is not None:
            background.append(source_refresh("nss-groups", NssGroups(config.nss_groups, cluster.group_commands),
                                             server, config.nss_groups.refresh_seconds))
        if config.slurm_accounts is not None:
            background.append(source_refresh("slurm-accounts",
                                             SlurmAccounts(config.slurm_accounts, cluster.group_commands), server,
                                             config.slurm_accounts.refresh_seconds))
        server.serve(cluster, background=tuple(background), fan_out_command=fan_out)
    except VNodeSyncError as e:
        print(f"vnode-coordinator: error: {e}", file=sys.stderr)
        if ha is not None:
            ha.close()
        return 2
    server.start()
    tune_for_streams()
    if ha is not None:
        ha.serving(server)
    if metrics:
        metrics.serve(cluster)
    if config.security.insecure:
        log.warning(INSECURE_WARNING, args.listen or config.listen)
    log.info("serving on port %d (%s), state in %s, generation %d, sharing %s", port,
             "mutual TLS" if credentials else "plaintext", store.path, cluster.generation(), config.policy.sharing)
    if args.print_port and ha is None:
        print(port, flush=True)
    while not stop.wait(0.2) and not server.failed.is_set():
        pass
    if server.failed.is_set():
        log.error("stopping: %s; exiting %d so the service manager restarts the coordinator",
                  server.failure, EXIT_LOOP_FAILED)
    else:
        log.info("stopping")
    server.stop(grace=STOP_GRACE_SECONDS)
    if metrics:
        metrics.stop()
    store.close()
    if ha is not None:
        ha.close()
    return EXIT_LOOP_FAILED if server.failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
