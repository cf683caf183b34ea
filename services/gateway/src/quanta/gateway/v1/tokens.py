"""`next` tokens: what a client carries between pages, authenticated with HMAC-SHA256.

Clients are untrusted, so everything the gateway hands out is signed and
everything it takes back is verified before a worker sees it. A token binds
its kind and dataset, so a plan can't be replayed against another dataset or
passed off as another kind. Layout (then base64url, no padding):

    version(1) kind(1) mode(1) len(kid)(1) kid  len(dataset)(1) dataset  payload  mac(32)

Version 2, for a query on one of the dataset's named graphs, also binds the
graph: `len(graph)(2) graph` follows the dataset. Version 3 has that graph
field (maybe empty) and then `elapsed_ms(4)`: the service's time on the query
so far (its round trips, in milliseconds, big-endian, at most 2^32 - 1), for
the page's time left (`eta_ms`); a version 1 or 2 token has none.

payload: the saved plan (kind "value"), a Redis plan id ("reference"), or the
query text ("query", or "partial query" for one asked with `partial`: a
query that timed out before any state was saved).
mac: HMAC-SHA256 under the key `kid` over every byte before it; key ids let
the secret rotate while tokens already issued still verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass
from enum import IntEnum

VERSION = 1
GRAPH_VERSION = 2  # the layout with a graph
ELAPSED_VERSION = 3  # with a graph (maybe empty) and the query's elapsed time
MAX_ELAPSED_MS = (1 << 32) - 1
MAC_BYTES = 32
ALPHABET = re.compile(rb"^[A-Za-z0-9_-]*$")


class Kind(IntEnum):
    VALUE = 1
    REFERENCE = 2
    QUERY = 3
    PARTIAL_QUERY = 4  # "query", for a query asked with `partial` (its pages are partial answers)


class InvalidToken(ValueError):
    """Any token this gateway did not issue, unchanged, under a key it still holds."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    dataset: str
    payload: bytes
    # The plan mode the client asked for (queue_pb2.PlanMode), kept for the next pages.
    mode: int = 0
    graph: str = ""  # a named graph's IRI; "" the default graph
    elapsed_ms: int | None = None  # the service's time on the query so far; None: not known (older tokens)


class Signer:
    """Signs with the first key, verifies with any."""

    def __init__(self, keys: list[tuple[str, bytes]]) -> None:
        if not keys:
            raise ValueError("at least one signing key is needed")
        self.kid = keys[0][0].encode()
        self.keys = {kid.encode(): secret for kid, secret in keys}

    def sign(self, token: Token) -> str:
        name, graph = token.dataset.encode(), token.graph.encode()
        version = ELAPSED_VERSION if token.elapsed_ms is not None else GRAPH_VERSION if graph else VERSION
        header = bytes((version, token.kind, token.mode, len(self.kid)))
        bound = len(graph).to_bytes(2, "big") + graph if version != VERSION else b""
        if token.elapsed_ms is not None:
            bound += min(max(token.elapsed_ms, 0), MAX_ELAPSED_MS).to_bytes(4, "big")
        body = b"".join((header, self.kid, bytes((len(name),)), name, bound, token.payload))
        mac = hmac.new(self.keys[self.kid], body, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(body + mac).rstrip(b"=").decode()

    def verify(self, text: str) -> Token:
        raw = _decode(text)
        if len(raw) < 5 + MAC_BYTES or raw[0] not in (VERSION, GRAPH_VERSION, ELAPSED_VERSION):
            raise InvalidToken("not a token of this service")
        body, mac = raw[:-MAC_BYTES], raw[-MAC_BYTES:]
        kid_end = 4 + body[3]
        kid = body[4:kid_end]
        secret = self.keys.get(kid)
        if secret is None:
            raise InvalidToken("signed with a key this service does not hold")
        if not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
            raise InvalidToken("signature does not match")
        # Authentic from here on: the layout was written by sign().
        try:
            kind = Kind(body[1])
            name_end = kid_end + 1 + body[kid_end]
            dataset = body[kid_end + 1 : name_end].decode()
            graph = ""
            elapsed = None
            if body[0] != VERSION:
                graph_end = name_end + 2 + int.from_bytes(body[name_end : name_end + 2], "big")
                graph = body[name_end + 2 : graph_end].decode()
                name_end = graph_end
            if body[0] == ELAPSED_VERSION:
                elapsed = int.from_bytes(body[name_end : name_end + 4], "big")
                name_end += 4
        except (ValueError, IndexError) as error:
            raise InvalidToken("malformed token") from error
        return Token(kind=kind, dataset=dataset, payload=body[name_end:], mode=body[2], graph=graph, elapsed_ms=elapsed)


def _decode(text: str) -> bytes:
    """Strict base64url: one encoding per byte string, so no altered character still verifies."""
    data = text.encode("ascii", "replace")
    if not ALPHABET.match(data) or len(data) % 4 == 1:
        raise InvalidToken("not base64url")
    try:
        raw = base64.urlsafe_b64decode(data + b"=" * (-len(data) % 4))
    except binascii.Error as error:
        raise InvalidToken("not base64url") from error
    # Unused low bits of the last character would otherwise give equal bytes.
    if base64.urlsafe_b64encode(raw).rstrip(b"=") != data:
        raise InvalidToken("not canonical base64url")
    return raw
