"""Tokens: what verifies, what is refused (rotation, unknown keys, any altered byte)."""

from __future__ import annotations

import base64

import pytest

from quanta.gateway.v1.tokens import InvalidToken, Kind, Signer, Token

K1 = ("k1", b"first secret, long enough......")
K2 = ("k2", b"second secret, long enough.....")
K3 = ("k3", b"third secret, never configured.")
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.mark.parametrize(
    "token",
    [
        Token(Kind.VALUE, "watdiv", bytes(range(256)), mode=1),
        Token(Kind.REFERENCE, "watdiv-100k", b"0f3a9c", mode=2),
        Token(Kind.QUERY, "d", 'SELECT * WHERE { ?s ?p "é" }'.encode()),
        Token(Kind.VALUE, "x" * 64, b""),
        Token(Kind.VALUE, "watdiv", b"plan", graph="http://example.org/graphs/é"),
        Token(Kind.QUERY, "d", b"ASK {}", graph="http://g" + "x" * 300),
        Token(Kind.VALUE, "watdiv", b"plan", elapsed_ms=0),
        Token(Kind.REFERENCE, "watdiv", b"ref", graph="http://g", elapsed_ms=(1 << 32) - 1),
    ],
)
def test_round_trip(token: Token) -> None:
    signer = Signer([K1])
    text = signer.sign(token)
    assert set(text) <= set(ALPHABET)
    assert signer.verify(text) == token


def test_rotation_old_key_still_verifies_new_key_signs() -> None:
    old = Signer([K1]).sign(Token(Kind.VALUE, "watdiv", b"plan"))
    rotated = Signer([K2, K1])
    assert rotated.verify(old).payload == b"plan"
    new = rotated.sign(Token(Kind.VALUE, "watdiv", b"plan"))
    assert new != old
    assert Signer([K2]).verify(new).payload == b"plan"
    with pytest.raises(InvalidToken, match="key"):
        Signer([K1]).verify(new)  # k1-only gateways don't know k2


def test_unknown_key_id_refused() -> None:
    forged = Signer([K3]).sign(Token(Kind.VALUE, "watdiv", b"plan"))
    with pytest.raises(InvalidToken, match="key"):
        Signer([K2, K1]).verify(forged)


def test_same_kid_other_secret_refused() -> None:
    forged = Signer([("k1", b"a guess at the secret.........")]).sign(Token(Kind.VALUE, "watdiv", b"plan"))
    with pytest.raises(InvalidToken, match="signature"):
        Signer([K1]).verify(forged)


def test_every_altered_character_refused() -> None:
    signer = Signer([K1])
    text = signer.sign(Token(Kind.VALUE, "watdiv", b"\x08\x02\x10\x04 some plan bytes"))
    for i, char in enumerate(text):
        for other in ALPHABET + "+/=. ":
            if other != char:
                with pytest.raises(InvalidToken):
                    signer.verify(text[:i] + other + text[i + 1 :])
        with pytest.raises(InvalidToken):
            signer.verify(text[:i] + text[i + 1 :])  # deleted
    for suffix in ("A", "AA", "=", "==", "\n"):
        with pytest.raises(InvalidToken):
            signer.verify(text + suffix)


def test_every_flipped_bit_refused() -> None:
    signer = Signer([K1])
    raw = base64.urlsafe_b64decode(signer.sign(Token(Kind.REFERENCE, "watdiv", b"ref-1")) + "==")
    for i in range(len(raw)):
        for bit in range(8):
            altered = bytearray(raw)
            altered[i] ^= 1 << bit
            with pytest.raises(InvalidToken):
                signer.verify(base64.urlsafe_b64encode(bytes(altered)).rstrip(b"=").decode())


def test_kind_and_dataset_are_signed() -> None:
    """Relabelling a reference as a value, or moving it to another dataset, breaks the MAC."""
    signer = Signer([K1])
    raw = bytearray(base64.urlsafe_b64decode(signer.sign(Token(Kind.REFERENCE, "aaaa", b"r")) + "=="))
    raw[1] = Kind.VALUE
    with pytest.raises(InvalidToken):
        signer.verify(base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode())
    raw[1] = Kind.REFERENCE
    raw[raw.index(b"aaaa") : raw.index(b"aaaa") + 4] = b"bbbb"
    with pytest.raises(InvalidToken):
        signer.verify(base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode())


@pytest.mark.parametrize("garbage", ["", "x", "not a token", "é", "A" * 10, "AQ" * 40, "////"])
def test_garbage_refused(garbage: str) -> None:
    with pytest.raises(InvalidToken):
        Signer([K1]).verify(garbage)


def test_a_token_binds_its_graph() -> None:
    """The graph is signed with the rest: changing it breaks the signature."""
    signer = Signer([K1])
    raw = bytearray(base64.urlsafe_b64decode(signer.sign(Token(Kind.VALUE, "d", b"p", graph="http://a")) + "=="))
    raw[raw.index(b"http://a") + 7] = ord("b")
    forged = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    with pytest.raises(InvalidToken):
        signer.verify(forged)


def test_the_elapsed_time_is_signed_and_saturates() -> None:
    """A /v1 token carries the service's time on the query (for the page's eta_ms): changing it
    breaks the signature; past 2^32 - 1 ms it stays there."""
    signer = Signer([K1])
    raw = bytearray(base64.urlsafe_b64decode(signer.sign(Token(Kind.VALUE, "d", b"plan", elapsed_ms=258)) + "=="))
    at = raw.index(b"plan") - 4
    assert raw[0] == 3 and raw[at : at + 4] == (258).to_bytes(4, "big")
    raw[at + 3] = 3
    with pytest.raises(InvalidToken):
        signer.verify(base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode())
    assert signer.verify(signer.sign(Token(Kind.VALUE, "d", b"p", elapsed_ms=1 << 40))).elapsed_ms == (1 << 32) - 1
    assert signer.verify(signer.sign(Token(Kind.VALUE, "d", b"p"))).elapsed_ms is None  # versions 1 and 2: none
