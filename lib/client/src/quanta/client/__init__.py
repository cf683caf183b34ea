"""The smart client: any SPARQL 1.1 query over a quanta service (SmartClient,
SyncClient, `quanta client`), and the low-level `/v1` client (QuantaClient)."""

from quanta.client.budgets import Budgets
from quanta.client.http import HttpTransport, Page, QuantaClient, ServiceError
from quanta.client.requester import RequestEvent, Retry
from quanta.client.services import ServiceEndpoint, SmartClientEndpoint, SparqlEndpoint
from quanta.client.smart import DatasetSpec, Execution, SmartClient
from quanta.client.sync import SyncClient, SyncExecution
from quanta.client.transport import QueryError, SubPage, SubRequest, Transport
from quanta.sparql.term_rows import Row

__all__ = [
    "Budgets",
    "DatasetSpec",
    "Execution",
    "HttpTransport",
    "Page",
    "QuantaClient",
    "QueryError",
    "RequestEvent",
    "Retry",
    "Row",
    "ServiceEndpoint",
    "ServiceError",
    "SmartClient",
    "SmartClientEndpoint",
    "SparqlEndpoint",
    "SubPage",
    "SubRequest",
    "SyncClient",
    "SyncExecution",
    "Transport",
]
