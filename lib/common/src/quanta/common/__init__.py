"""The contract between the gateway and the workers (Redis is the only shared state)."""
