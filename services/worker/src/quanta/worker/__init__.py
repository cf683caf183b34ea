"""A stateless worker: one task, one quantum, one reply."""
