"""The Prometheus metrics endpoint shared by the coordinator and the agents: its settings and its server."""
