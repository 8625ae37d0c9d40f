"""Local stand-ins for a cluster: loop devices, HDFS daemons, Slurm, readers; for tests, demos and benchmarks."""

import vnode_sync  # noqa: F401  first: it turns gRPC's fork handlers off, which gRPC reads when it loads
