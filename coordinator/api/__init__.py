"""The coordinator's gRPC servers: the main one, its services (Admin, AgentLink, metrics) and the
loops it runs on its event loop, and a fan-out process's."""
