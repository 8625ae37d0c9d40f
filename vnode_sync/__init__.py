"""vnode-sync: per-user block-I/O quality of service for shared cluster storage."""

import os

# vnode-sync only forks to exec. gRPC's fork handlers, on by default, restart its poller in the
# child, which then dies of EBADF when Popen closes descriptors before exec (grpc/grpc#43055,
# grpcio >= 1.81): a Hadoop client or lctl started beside a live channel crashed with SIGSEGV.
# gRPC reads this when it is imported, so this package must load first: tests/, testbed/ and
# benchmarks/ import it at the top of their packages.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


def __getattr__(name: str):
    # Looked up when asked for, not at every import: the version is read from pyproject.toml or metadata.
    if name == "__version__":
        from vnode_sync.distribution import version
        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
