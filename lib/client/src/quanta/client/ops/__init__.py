"""The client's physical operators, one module per family."""
