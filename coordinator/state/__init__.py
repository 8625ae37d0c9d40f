"""The coordinator's state: the durable store (SQLite or ZooKeeper), the groups' rules, the usage
ledger and what is read from it, and the one thread the store is touched on."""
