"""Schemathesis hooks for test_openapi_contract.py (loaded by SCHEMATHESIS_HOOKS): what the
OpenAPI document's own formats are, since JSON Schema cannot say which strings parse or verify."""

from __future__ import annotations

import os

import schemathesis
from hypothesis import strategies as st

USER = "<http://db.uwaterloo.ca/~galuc/wsdbm/User0>"
LIKES = "<http://db.uwaterloo.ca/~galuc/wsdbm/likes>"
QUERIES = [
    f"SELECT ?o WHERE {{ {USER} {LIKES} ?o }}",
    f"SELECT ?s WHERE {{ ?s {LIKES} <http://db.uwaterloo.ca/~galuc/wsdbm/Product0> }}",
    f"ASK {{ {USER} {LIKES} ?o }}",
]

schemathesis.openapi.format("sparql-query", st.sampled_from(QUERIES))
# `next` tokens this service issued (the test starts queries for them): any other is refused, as it must be.
schemathesis.openapi.format("quanta-token", st.sampled_from(os.environ["QUANTA_CONTRACT_TOKENS"].split()))
