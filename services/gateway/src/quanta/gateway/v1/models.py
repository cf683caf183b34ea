"""/v1's request and response models: they validate requests and document responses in the OpenAPI.

Pages are not serialized through these models (the bindings arrive as JSON
bytes from the worker and are spliced in as they are); QueryPage documents
the shape that splicing produces.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EXAMPLE_QUERY = "SELECT ?s ?o WHERE { ?s <http://schema.org/caption> ?o } LIMIT 2"


class QueryRequest(BaseModel):
    """Start a query (`query`) or continue one (`next`), never both."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            # (no `next` example: a made-up token is refused, and examples must be valid requests)
            "examples": [{"query": EXAMPLE_QUERY}, {"query": EXAMPLE_QUERY, "plan": "reference"}],
            # _one_input, said in the schema: exactly one of the two is a string
            "oneOf": [
                {"required": ["query"], "properties": {"query": {"type": "string"}}},
                {"required": ["next"], "properties": {"next": {"type": "string"}}},
            ],
        },
    )

    query: str | None = Field(
        None,
        description="SPARQL query text (the server fragment: see docs/protocol.md)",
        json_schema_extra={"minLength": 1, "format": "sparql-query"},
    )
    next: str | None = Field(
        None, description="the `next` token of the previous page", json_schema_extra={"format": "quanta-token"}
    )
    graph: str | None = Field(
        None,
        description="the IRI of one of the dataset's named graphs (GET /v1/datasets lists them); omitted: the "
        "default graph. A `next` token stays bound to the graph its query started on.",
    )
    partial: bool = Field(
        False,
        description="answer a DISTINCT, or a GROUP BY of variables with one COUNT(*), per quantum: each page's "
        "rows are distinct, with their counts, in that page alone, for the client to merge (docs/protocol.md, "
        "Partial answers). Otherwise such a query is outside the server fragment. Ignored with `next`: a token "
        "continues its query as it began.",
    )
    whole: bool = Field(
        False,
        description="run the query whole: every operator on the worker (subqueries, GROUP BY with COUNT, MIN, "
        "MAX or SAMPLE, HAVING, DISTINCT, ORDER BY), suspended and resumed like any query, or the error "
        "`unfinished` when the worker cannot run it whole (docs/protocol.md, Queries run whole). Ignored with `next`.",
    )
    plan: Literal["auto", "value", "reference"] | None = Field(
        None,
        description="how to return the saved plan: in the token (value), kept server-side (reference), or the "
        "dataset's rule (auto). Omitted: what the query asked for before, else the dataset's default.",
    )

    @model_validator(mode="after")
    def _one_input(self) -> QueryRequest:
        if (self.query is None) == (self.next is None):
            raise ValueError("give exactly one of `query` (to start) or `next` (to continue)")
        return self


class Head(BaseModel):
    vars: list[str] | None = Field(None, description="absent for ASK")


class Results(BaseModel):
    bindings: list[dict[str, dict[str, str]]] = Field(description="SPARQL 1.1 JSON results bindings")


class Stats(BaseModel):
    queue_wait_ms: float = Field(description="time the task waited in the stream")
    parse_ms: float = Field(description="parsing and planning (first page only)")
    resume_ms: float = Field(description="loading the saved plan")
    quantum_ms: float = Field(description="execution time of this quantum")
    suspend_ms: float = Field(description="saving the plan")
    overshoot_ms: float = Field(description="how far the quantum ran past its deadline")
    plan_bytes: int = Field(description="size of the saved plan (0 when complete)")
    worker: str = Field(description="the worker that ran the quantum")
    results: int = Field(description="solutions in this page")
    plan: Literal["value", "reference"] | None = Field(description="how `next` carries the plan")
    round_trip_ms: float = Field(description="from enqueue to reply, as the gateway saw it")
    progress: float = Field(
        description="the estimated fraction of the query done, 0..1 (1 on the last page): nested-loop progress "
        "from the saved plan's scan offsets and HDT's exact pattern counts (docs/protocol.md)"
    )
    eta_ms: float | None = Field(
        description="the estimated time left at the pace so far: elapsed * (1 - progress) / progress, elapsed "
        "being the service's time on the query (its pages' round trips); null when progress is 0 or unknown"
    )


class QueryPage(BaseModel):
    """A page of results. SELECT: `head.vars` and `results`. ASK: `boolean` on the last page."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "head": {"vars": ["s", "o"]},
                    "results": {
                        "bindings": [
                            {
                                "s": {"type": "uri", "value": "http://db.uwaterloo.ca/~galuc/wsdbm/Product0"},
                                "o": {"type": "literal", "value": "resolutions ..."},
                            }
                        ]
                    },
                    "next": "AQEAAmsxC3dhdGRpdi0xMDBr...",
                    "stats": {
                        "queue_wait_ms": 0.2,
                        "parse_ms": 1.9,
                        "resume_ms": 0.0,
                        "quantum_ms": 75.1,
                        "suspend_ms": 0.02,
                        "overshoot_ms": 0.1,
                        "plan_bytes": 121,
                        "worker": "host-1234",
                        "results": 1,
                        "plan": "value",
                        "round_trip_ms": 77.8,
                        "progress": 0.25,
                        "eta_ms": 233.4,
                    },
                }
            ]
        }
    )

    head: Head
    results: Results | None = Field(None, description="absent on the last page of an ASK query")
    boolean: bool | None = Field(None, description="ASK only, on the last page")
    next: str | None = Field(description='send it back as {"next": ...} for the next page; null when complete')
    stats: Stats


class Example(BaseModel):
    name: str
    query: str


class DatasetInfo(BaseModel):
    name: str
    description: str
    quantum_ms: float | None = Field(description="time quantum per request; null: never suspended (run to the end)")
    max_results: int
    plan_mode: Literal["auto", "value", "reference"]
    examples: list[Example] = Field(description="example queries (the query page offers them)")
    graphs: list[str] = Field(description="the IRIs of its named graphs (a /v1 request's `graph`)")


class DatasetList(BaseModel):
    datasets: list[DatasetInfo]
