"""What `GET /sparql/{dataset}` without a query answers: the SPARQL 1.1
Service Description of the endpoint, with a VoID description of its dataset.

Written as triples in the dictionary syntax (quanta.sparql.graphs writes them
in any graph format). The gateway never opens the data files, so the VoID
part says what the catalog knows (name, description, endpoint) and no counts.
"""

from __future__ import annotations

from starlette.types import Scope

from quanta.common.catalog import Dataset
from quanta.sparql.graphs import Triple
from quanta.sparql.terms import literal

SD = "http://www.w3.org/ns/sparql-service-description#"
VOID = "http://rdfs.org/ns/void#"
FORMATS = "http://www.w3.org/ns/formats/"
DCTERMS = "http://purl.org/dc/terms/"
FOAF = "http://xmlns.com/foaf/0.1/"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
PREFIXES = {"sd": SD, "void": VOID, "formats": FORMATS, "dcterms": DCTERMS, "foaf": FOAF}

# What the endpoint writes (negotiation.RESULTS and GRAPHS), as the W3C names them.
RESULT_FORMATS = (
    "SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV",
    "Turtle", "N-Triples", "RDF_XML", "JSON-LD",
)  # fmt: skip


def origin(scope: Scope, public_url: str) -> str:
    """The service's own origin: the configured public URL, else the address the connection
    reached (never the client's Host header, which would let a client write the description)."""
    if public_url:
        return public_url.rstrip("/")
    host, port = scope.get("server") or ("localhost", None)
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}.get(scope.get("scheme", "http"))
    return f"{scope.get('scheme', 'http')}://{host}" + (f":{port}" if port and port != default else "")


def service_description(endpoint: str, dataset: Dataset, federated: bool, page: str) -> list[Triple]:
    """The description of `endpoint` (its absolute URL), which serves `dataset`;
    `federated` when SERVICE is allowed (an allowlist is configured); `page`:
    the query page's URL for this dataset (foaf:page)."""
    described = endpoint + "#dataset"
    default_graph = endpoint + "#default-graph"
    triples: list[Triple] = [
        (endpoint, RDF_TYPE, SD + "Service"),
        (endpoint, SD + "endpoint", endpoint),
        (endpoint, FOAF + "page", page),
        (endpoint, SD + "supportedLanguage", SD + "SPARQL10Query"),
        (endpoint, SD + "supportedLanguage", SD + "SPARQL11Query"),
        *[(endpoint, SD + "resultFormat", FORMATS + name) for name in RESULT_FORMATS],
        *([(endpoint, SD + "feature", SD + "BasicFederatedQuery")] if federated else []),
        (endpoint, SD + "defaultDataset", described),
        (described, RDF_TYPE, SD + "Dataset"),
        (described, RDF_TYPE, VOID + "Dataset"),
        (described, DCTERMS + "title", literal(dataset.name)),
        *([(described, DCTERMS + "description", literal(dataset.description))] if dataset.description else []),
        (described, VOID + "sparqlEndpoint", endpoint),
        (described, SD + "defaultGraph", default_graph),
        (default_graph, RDF_TYPE, SD + "Graph"),
    ]
    return triples
