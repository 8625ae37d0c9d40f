"""The kernel seam: cgroup v1 blkio and cgroup v2 io enforcement behind one interface."""
