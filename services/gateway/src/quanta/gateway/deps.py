"""What every request shares (Services, on app.state), and typed dependencies for the simple routes.

The query route reads app.state itself: dependencies cost more than its own work.

All are `async def`: FastAPI runs plain `def` dependencies in a thread pool,
a thread hop per dependency per request. Settings come from app.state (set by
create_app) rather than through `dependency_overrides`, which FastAPI
re-analyses on every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from quanta.client.smart import SmartClient
from quanta.common.catalog import Dataset
from quanta.gateway.config import Settings
from quanta.gateway.sparql_endpoint.fair_use import FairUse
from quanta.gateway.tasks.dispatch import Dispatcher
from quanta.gateway.tasks.shards import Shards
from quanta.gateway.v1.tokens import Signer


@dataclass(slots=True)
class Services:
    """What the lifespan builds once per process and every request shares."""

    settings: Settings
    catalog: dict[str, Dataset]
    signer: Signer
    shards: Shards  # the queue's Redis servers
    dispatcher: Dispatcher
    fair_use: FairUse  # the SPARQL endpoint's admission of queries
    smart_client: SmartClient  # runs the SPARQL endpoint's queries, over the dispatcher


async def get_shards(request: Request) -> Shards:
    return request.app.state.services.shards  # type: ignore[no-any-return]


async def get_catalog(request: Request) -> dict[str, Dataset]:
    return request.app.state.services.catalog  # type: ignore[no-any-return]


ShardsDep = Annotated[Shards, Depends(get_shards)]
CatalogDep = Annotated[dict[str, Dataset], Depends(get_catalog)]
