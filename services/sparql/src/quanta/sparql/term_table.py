"""What every operator of one running plan shares: the store, the quantum,
the term table, and the mapping width."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rdflib.term import Node

from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore
from quanta.engine.terms import from_rdflib, to_rdflib

Mapping = tuple[int, ...]
"""A solution mapping: one global term id per variable slot, 0 = unbound."""


class TermTable:
    """Terms by global id. Dictionary terms come from the store; terms outside
    it (query constants the data lacks, values computed by BIND) get negative
    ids: -1 is `extra[0]`. Ids never change once given (expressions cache
    them), so a table only grows; a pooled plan's table is dropped when large."""

    def __init__(self, store: TripleStore, extra: list[str] | None = None) -> None:
        self.store = store
        self.extra: list[str] = []
        self._extra_ids: dict[str, int] = {}
        self._nodes: dict[int, Node] = {}
        self._fixed = 0
        self._restored: list[int] = []
        for term in extra or ():
            self._add_extra(term)

    def _add_extra(self, term: str) -> int:
        self.extra.append(term)
        gid = -len(self.extra)
        self._extra_ids[term] = gid
        return gid

    def intern(self, term: str) -> int:
        gid = self._extra_ids.get(term)
        if gid is None:
            gid = self.store.locate(term) or self._add_extra(term)
        return gid

    def intern_node(self, node: Node) -> int:
        return self.intern(from_rdflib(node))

    def string(self, gid: int) -> str:
        return self.extra[-gid - 1] if gid < 0 else self.store.extract(gid)

    def node(self, gid: int) -> Node:
        """The rdflib term of an id, decoded once (FILTERs compare values)."""
        node = self._nodes.get(gid)
        if node is None:
            node = to_rdflib(self.string(gid))
            if len(self._nodes) < 200_000:
                self._nodes[gid] = node
        return node

    def restore_terms(self, fixed: int, terms: list[str]) -> None:
        """Before loading a saved state: the state numbers its own terms after
        the plan's `fixed` ones; map them to this table's ids."""
        self._fixed = fixed
        self._restored = [self.intern(term) for term in terms]

    def restored(self, gid: int) -> int:
        """This table's id for an id read from a saved state."""
        if gid >= -self._fixed:
            return gid
        index = -gid - self._fixed - 1
        if index >= len(self._restored):
            raise ValueError(f"saved state refers to unknown term {gid}")
        return self._restored[index]

    def saver(self, fixed: int) -> TermSaver:
        return TermSaver(self, fixed)


class TermSaver:
    """Renumbers extra terms while a plan's state is saved: the first `fixed`
    belong to the static plan; of the rest (values computed by BIND) the
    saved state carries only those it still refers to."""

    def __init__(self, table: TermTable, fixed: int) -> None:
        self.table = table
        self.fixed = fixed
        self.extra: list[str] = []
        self._ids: dict[int, int] = {}

    def id(self, gid: int) -> int:
        if gid >= -self.fixed:
            return gid
        new = self._ids.get(gid)
        if new is None:
            self.extra.append(self.table.string(gid))
            new = self._ids[gid] = -self.fixed - len(self.extra)
        return new

    def ids(self, values: Mapping) -> list[int]:
        """A mapping for saving: extra ids renumbered, trailing unbound slots dropped."""
        out = [self.id(v) for v in values]
        while out and out[-1] == 0:
            out.pop()
        return out


def _unbounded() -> int | None:
    return None


@dataclass(slots=True)
class Context:
    store: TripleStore
    quantum: Quantum
    terms: TermTable
    width: int  # number of variable slots
    # how many more solutions the page takes (None: no bound); native chains
    # size their batches so as never to read further than the Python operators would
    wanted: Callable[[], int | None] = _unbounded

    def widen(self, values: list[int] | tuple[int, ...]) -> Mapping:
        """A trimmed mapping back to full width."""
        return tuple(values) + (0,) * (self.width - len(values))
