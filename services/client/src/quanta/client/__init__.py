"""Client for a quanta service."""

from quanta.client.client import Page, QuantaClient, ServiceError

__all__ = ["Page", "QuantaClient", "ServiceError"]
