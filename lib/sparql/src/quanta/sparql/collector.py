"""Python's cyclic garbage collector paused around work that makes many objects
and no cycles: a quantum's rows in the worker, a page's decoded JSON in a client.

Allocating containers triggers collections that visit every young object, and
now and then every object alive: a page of a megabyte is about 10^5 of them, so
collecting while it is made cost more than making it (a client decoding a
1 MiB page took 11 ms instead of 3). The collector runs after, on the next
allocation, over what is left."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
