"""The OpenAPI document and the service agree: schemathesis, every check, against a real service.

Every request the document allows is accepted (2xx, or a status the check allows such as 404
for a dataset that does not exist), every request it forbids is refused with a 4xx, every
answer has a documented status, media type, headers and schema, and a 405 lists the methods
that work. Queries and `next` tokens come from contract_hooks.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from .conftest import Service

SERVICE_OPTIONS = {"QUANTA_SPARQL_QUERY_RATE": "0", "QUANTA_RATE_LIMIT": "0", "QUANTA_ACCESS_LOG": "0"}
EVERYTHING = "SELECT * WHERE { ?s ?p ?o }"


def test_the_service_keeps_its_openapi_contract(module_service: Service, tmp_path: Path) -> None:
    tokens = []
    for plan in ("value", "reference"):  # one of each kind; replays give the same page
        page = httpx.post(
            module_service.url + "/v1/datasets/watdiv/query", json={"query": EVERYTHING, "plan": plan}, timeout=30
        ).json()
        tokens.append(page["next"])
    here = Path(__file__).parent
    env = {
        **os.environ, "QUANTA_CONTRACT_TOKENS": " ".join(tokens), "SCHEMATHESIS_HOOKS": "contract_hooks",
        "PYTHONPATH": os.pathsep.join([str(here), os.environ.get("PYTHONPATH", "")]),
    }  # fmt: skip
    command = [
        str(Path(sys.executable).parent / "st"), "run", module_service.url + "/openapi.json", "--checks", "all",
        "--max-examples", "30", "--request-timeout", "30", "--workers", "1", "--seed", "17", "--no-color",
    ]  # fmt: skip
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # its cache
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
