"""Who may talk to whom: certificates, mutual TLS, and the coordinator's authorization rules."""
