import vnode_sync  # noqa: F401  first: it turns gRPC's fork handlers off, which gRPC reads when it loads
