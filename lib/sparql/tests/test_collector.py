"""collection_paused: the collector is off inside, and as it was after (nested, or on error)."""

from __future__ import annotations

import gc

import pytest

from quanta.sparql.collector import collection_paused


def test_the_collector_is_paused_inside_and_as_it_was_after() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one found it paused: the outer one resumes it
    assert gc.isenabled()
    with pytest.raises(ValueError), collection_paused():
        raise ValueError
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
