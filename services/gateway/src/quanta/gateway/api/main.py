"""All routers, assembled in one place."""

from fastapi import APIRouter

from quanta.gateway.api import datasets, health, queries, sparql, web

api_router = APIRouter()
api_router.include_router(datasets.router)
api_router.include_router(queries.router)
api_router.include_router(sparql.router)
api_router.include_router(health.router)
api_router.include_router(web.router)
