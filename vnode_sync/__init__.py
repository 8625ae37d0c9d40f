"""vnode-sync: per-user block-I/O quality of service for shared cluster storage."""

__version__ = "0.1.0"
