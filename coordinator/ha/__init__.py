"""One leader among several coordinators, elected through ZooKeeper (docs/ha.md)."""
