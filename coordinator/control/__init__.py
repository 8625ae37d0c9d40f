"""From users, priorities and what the nodes report to what each node is sent: the work-conserving
weight step, the static shares, the desired state per generation, and what agents told us."""
