"""The coordinator: users, priorities, shares; serves desired state to agents."""
