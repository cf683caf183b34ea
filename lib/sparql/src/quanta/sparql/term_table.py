"""The term table: RDF terms by integer id, for the operators and expressions of one plan.

Ids come from a dictionary when there is one (a dataset's: `locate` and
`extract`, as the engine's stores provide); every other term gets a negative
id. A table with no dictionary at all (the client's) gives every term a
negative id. 0 is "unbound" in a mapping.
"""

from __future__ import annotations

from typing import Protocol

from quanta.sparql.syntax import RdfTerm
from quanta.sparql.terms import from_term, to_term

IdMapping = tuple[int, ...]
"""A solution mapping: one term id per variable slot, 0 = unbound."""


class Dictionary(Protocol):
    """Terms (dictionary syntax) to positive ids and back: a dataset's dictionary."""

    def locate(self, term: str) -> int:
        """The id of a term, 0 if the dictionary lacks it."""
        ...

    def extract(self, gid: int) -> str:
        """The term of an id the dictionary gave."""
        ...


class NoDictionary:
    """The dictionary of a table without one: every term is outside it."""

    def locate(self, term: str) -> int:
        return 0

    def extract(self, gid: int) -> str:
        raise KeyError(f"term id {gid}: this term table has no dictionary")


class TermTable:
    """Terms by id. Dictionary terms have the dictionary's ids; terms outside
    it (query constants the data lacks, values computed by BIND; every term
    when `dictionary` is None) get negative ids: -1 is `extra[0]`. Ids never
    change once given (expressions cache them), so a table only grows; a
    pooled plan's table is dropped when large."""

    def __init__(self, dictionary: Dictionary | None, extra: list[str] | None = None) -> None:
        self.dictionary: Dictionary = dictionary if dictionary is not None else NoDictionary()
        self.extra: list[str] = []
        self.extra_chars = 0  # the extra terms' characters: who keeps a table bounds it by both
        self._extra_ids: dict[str, int] = {}
        self._nodes: dict[int, RdfTerm] = {}
        self._fixed = 0
        self._restored: list[int] = []
        for term in extra or ():
            self._add_extra(term)

    def _add_extra(self, term: str) -> int:
        self.extra.append(term)
        self.extra_chars += len(term)
        gid = -len(self.extra)
        self._extra_ids[term] = gid
        return gid

    def intern(self, term: str) -> int:
        gid = self._extra_ids.get(term)
        if gid is None:
            gid = self.dictionary.locate(term) or self._add_extra(term)
        return gid

    def intern_outside(self, term: str) -> int:
        """`intern` of a term its caller has already looked up in the dictionary and not
        found: the native core mints a BIND's values so (src/expr.rs `Terms::mint`),
        locating them in the file itself, which is this table's dictionary."""
        gid = self._extra_ids.get(term)
        return self._add_extra(term) if gid is None else gid

    def intern_node(self, node: RdfTerm) -> int:
        return self.intern(from_term(node))

    def string(self, gid: int) -> str:
        return self.extra[-gid - 1] if gid < 0 else self.dictionary.extract(gid)

    def node(self, gid: int) -> RdfTerm:
        """The algebra term (`quanta.sparql.syntax`) of an id, decoded once (FILTERs compare values)."""
        node = self._nodes.get(gid)
        if node is None:
            node = to_term(self.string(gid))
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

    def ids(self, values: IdMapping) -> list[int]:
        """A mapping for saving: extra ids renumbered, trailing unbound slots dropped."""
        out = [self.id(v) for v in values]
        while out and out[-1] == 0:
            out.pop()
        return out
