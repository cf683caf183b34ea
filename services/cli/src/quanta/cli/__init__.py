"""The `quanta` command."""
