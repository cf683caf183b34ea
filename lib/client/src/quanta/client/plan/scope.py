"""Variables and their slots: one numbering for the whole query.

Every row a client-side operator handles is a tuple with one cell per slot
(a dictionary-syntax term, or None: unbound), so joining two rows is merging
two tuples of the same width. A subquery's variables that it does not
project get slots of their own (they are other variables than the
same-named ones outside); hidden variables (blank nodes of a pattern, the
values of EXISTS, RAND(), path steps...) get fresh names no query variable has.
"""

from __future__ import annotations

from collections.abc import Iterable

from quanta.sparql.syntax import Var


class Slots:
    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.names: list[str] = []  # slot -> the name sent to the server (unique)
        self.taken = set(taken)  # every variable name the query text uses
        self.counter = 0

    @property
    def width(self) -> int:
        return len(self.names)

    def add(self, name: str) -> int:
        self.names.append(name)
        self.taken.add(name)
        return len(self.names) - 1

    def fresh(self, hint: str) -> Var:
        """A variable no part of the query uses."""
        while True:
            self.counter += 1
            name = f"_{hint}{self.counter}"
            if name not in self.taken:
                self.taken.add(name)
                return Var(name)


class Scope:
    """Var -> slot within one (sub)query. A child scope (a subquery)
    shares the slots of the variables it projects and gives the others new
    ones, named apart."""

    def __init__(self, slots: Slots, shared: dict[Var, int] | None = None) -> None:
        self.slots = slots
        self.of: dict[Var, int] = dict(shared or {})

    def slot(self, var: Var) -> int:
        slot = self.of.get(var)
        if slot is None:
            name = str(var) if str(var) not in self.slots.names else str(self.slots.fresh(str(var)))
            slot = self.of[var] = self.slots.add(name)
        return slot

    def name(self, var: Var) -> str:
        """The variable's name in text sent to the server."""
        return self.slots.names[self.slot(var)]

    def child(self, projected: Iterable[Var]) -> Scope:
        return Scope(self.slots, {v: self.slot(v) for v in projected})

    def fresh(self, hint: str) -> Var:
        var = self.slots.fresh(hint)
        self.slot(var)
        return var
