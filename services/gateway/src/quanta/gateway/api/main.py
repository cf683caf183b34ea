"""All routes, assembled in one place. The app includes each router itself: a router included in
a router is matched through both on every request (FastAPI 0.165: about 9 µs more a request).
The SPARQL endpoint's routes are Starlette's own (sparql_endpoint/routes.py says why)."""

from fastapi import APIRouter
from starlette.routing import BaseRoute

from quanta.gateway.api import health, web
from quanta.gateway.sparql_endpoint import routes as sparql_endpoint
from quanta.gateway.v1 import datasets, queries

routers: list[APIRouter] = [datasets.router, queries.router, health.router, web.router]
plain_routes: list[BaseRoute] = list(sparql_endpoint.routes)
