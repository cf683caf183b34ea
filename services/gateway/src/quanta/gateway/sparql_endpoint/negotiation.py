"""Content negotiation for the SPARQL endpoint: an Accept header and what a
query form can be written as, to one format (RFC 9110, section 12.5.1).

Each offered media type gets the quality of the most specific range that
matches it (`text/csv` before `text/*` before `*/*`, parameters other than
`q` ignored); q=0 refuses it. The highest quality wins, and between equals
the server's order (the first offer is the default, also for a missing or
empty Accept). Nothing acceptable: None, and the caller answers 406.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Offer:
    """A media type the endpoint can answer with, the format that writes it,
    and the Content-Type it is answered as (aliases answer with the canonical type)."""

    media_type: str
    format: str
    content_type: str


def _offers(*entries: tuple[str, str, str]) -> tuple[Offer, ...]:
    return tuple(Offer(media, fmt, content) for media, fmt, content in entries)


_JSON, _XML = "application/sparql-results+json", "application/sparql-results+xml"
_CSV, _TSV = "text/csv; charset=utf-8", "text/tab-separated-values; charset=utf-8"
_TTL, _NT = "text/turtle; charset=utf-8", "application/n-triples"
_RDFXML, _JSONLD = "application/rdf+xml", "application/ld+json"

# SELECT and ASK, in the server's order of preference (JSON is the default).
RESULTS = _offers(
    (_JSON, "json", _JSON),
    (_XML, "xml", _XML),
    ("text/csv", "csv", _CSV),
    ("text/tab-separated-values", "tsv", _TSV),
    ("application/json", "json", _JSON),
    ("application/xml", "xml", _XML),
    ("text/xml", "xml", _XML),
)
# CONSTRUCT and DESCRIBE (and the service description): Turtle is the default.
GRAPHS = _offers(
    ("text/turtle", "ttl", _TTL),
    ("application/n-triples", "nt", _NT),
    ("application/rdf+xml", "rdfxml", _RDFXML),
    ("application/ld+json", "jsonld", _JSONLD),
    ("application/x-turtle", "ttl", _TTL),
    ("text/plain", "nt", _NT),  # N-Triples' media type before RDF 1.1
    ("application/xml", "rdfxml", _RDFXML),
    ("text/xml", "rdfxml", _RDFXML),
)

# Any query form, never a default (asked by name): the progress stream, quanta among the results (progress.py).
EVENTS = Offer("text/event-stream", "events", "text/event-stream; charset=utf-8")


@dataclass(frozen=True, slots=True)
class MediaRange:
    type: str  # "*" or e.g. "text"
    subtype: str  # "*" or e.g. "csv"
    q: float

    def matches(self, media_type: str) -> bool:
        main, _, sub = media_type.partition("/")
        return self.type in ("*", main) and self.subtype in ("*", sub)

    @property
    def specificity(self) -> int:
        return (self.type != "*") + (self.subtype != "*")


def parse_accept(header: str) -> list[MediaRange]:
    """The media ranges of an Accept header; a malformed range (no `/`, a
    wildcard type with a concrete subtype, a q outside 0..1) is left out."""
    ranges = []
    for item in header.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        main, slash, sub = media.lower().partition("/")
        if not slash or not main or not sub or (main == "*" and sub != "*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = -1.0
        if 0.0 <= q <= 1.0:
            ranges.append(MediaRange(main, sub, q))
    return ranges


def quality(ranges: list[MediaRange], media_type: str) -> float:
    """The quality the client gives `media_type`: that of its most specific matching range."""
    best: MediaRange | None = None
    for r in ranges:
        if r.matches(media_type) and (best is None or r.specificity > best.specificity):
            best = r
    return best.q if best else 0.0


def negotiate(accept: str | None, offers: tuple[Offer, ...]) -> Offer | None:
    """The offer to answer with, or None when the client accepts none of them."""
    if not accept or not accept.strip():
        return offers[0]
    ranges = parse_accept(accept)
    chosen, chosen_q = None, 0.0
    for offer in offers:
        q = quality(ranges, offer.media_type)
        if q > chosen_q:
            chosen, chosen_q = offer, q
    return chosen


def accepted(offers: tuple[Offer, ...]) -> str:
    """The media types an error message lists (canonical ones, without aliases)."""
    seen: dict[str, None] = {}
    for offer in offers:
        seen.setdefault(offer.content_type.split(";")[0], None)
    return ", ".join(seen)
