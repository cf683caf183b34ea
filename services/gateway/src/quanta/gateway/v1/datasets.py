"""GET /v1/datasets: the catalog's public fields (never file paths)."""

from __future__ import annotations

import math

from fastapi import APIRouter

from quanta.gateway.deps import CatalogDep
from quanta.gateway.v1.models import DatasetInfo, DatasetList

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


@router.get("", response_model=DatasetList, summary="List the datasets served")
async def list_datasets(catalog: CatalogDep) -> DatasetList:
    return DatasetList(datasets=[_info(d.public()) for d in catalog.values()])


def _info(public: dict[str, object]) -> DatasetInfo:
    # JSON has no infinity: a dataset that never suspends (quantum_ms = inf) shows null.
    if public.get("quantum_ms") == math.inf:
        public = public | {"quantum_ms": None}
    return DatasetInfo.model_validate(public)
