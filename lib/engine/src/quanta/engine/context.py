"""What every operator of one running plan shares: the store, the quantum,
the term table (`quanta.sparql.term_table`), and the mapping width."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore
from quanta.sparql.term_table import IdMapping, TermTable


def _unbounded() -> int | None:
    return None


@dataclass(slots=True)
class Context:
    store: TripleStore
    quantum: Quantum
    terms: TermTable
    width: int  # number of variable slots
    # how many more solutions the page takes (None: no bound); a native plan
    # sizes its batches so as never to read further than the Python operators would
    wanted: Callable[[], int | None] = _unbounded

    def widen(self, values: list[int] | tuple[int, ...]) -> IdMapping:
        """A trimmed mapping back to full width."""
        return tuple(values) + (0,) * (self.width - len(values))
