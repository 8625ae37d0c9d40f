"""vnode-coordinator: serve users, priorities and shares to agents and admins."""

import argparse
import logging
import signal
import sys
import threading

from vnode_sync.coordinator.cluster import Cluster
from vnode_sync.coordinator.config import load_config
from vnode_sync.coordinator.service import create_server
from vnode_sync.coordinator.store import StateStore
from vnode_sync.errors import ConfigError, VNodeSyncError
from vnode_sync.logs import configure
from vnode_sync.security.audit import send_audit_to
from vnode_sync.security.tls import INSECURE_WARNING, server_credentials

log = logging.getLogger(__name__)

JOB_EXPIRY_CHECK_SECONDS = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vnode-coordinator", description=__doc__)
    parser.add_argument("--config", required=True, help="coordinator YAML file")
    parser.add_argument("--listen", help="override the config's listen address (host:port)")
    parser.add_argument("--state-path", help="override the config's SQLite path")
    parser.add_argument("--print-port", action="store_true", help="print the bound port on stdout once serving")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
        configure("coordinator", config.log_format)
        if config.security.unset:
            raise ConfigError(f"{args.config}: no tls section; the coordinator refuses to serve plaintext. "
                              "Set tls: {ca, cert, key} or insecure: true (lab only)")
        credentials = server_credentials(config.security.tls) if config.security.tls else None
        if config.audit_log:
            send_audit_to(config.audit_log)
        store = StateStore(args.state_path or config.state_path)
        cluster = Cluster(config, store)
        server, port = create_server(cluster, args.listen or config.listen, credentials=credentials)
    except VNodeSyncError as e:
        print(f"vnode-coordinator: error: {e}", file=sys.stderr)
        return 2
    server.start()
    if config.security.insecure:
        log.warning(INSECURE_WARNING, args.listen or config.listen)
    log.info("serving on port %d (%s), state in %s, generation %d, mode %s", port,
             "mutual TLS" if credentials else "plaintext", args.state_path or config.state_path,
             cluster.generation(), config.policy.mode)
    if args.print_port:
        print(port, flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(JOB_EXPIRY_CHECK_SECONDS):
        cluster.expire_jobs()
    log.info("stopping")
    server.stop(grace=2).wait()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
