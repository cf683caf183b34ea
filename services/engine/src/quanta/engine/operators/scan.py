"""Preemptable index scan of one triple pattern (Algorithm 3)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator, State, load_count
from quanta.plan.v1 import plan_pb2 as pb
from quanta.sparql.term_table import Mapping, TermSaver

Binder = Callable[[Mapping, tuple[int, int, int]], Mapping | None]


@lru_cache(maxsize=4096)
def binder(width: int, assign: tuple[tuple[int, int], ...]) -> Binder:
    """A function (mapping, triple) -> extended mapping, generated once per
    shape so the hot loop builds each mapping with one tuple display.

    `assign` lists (slot, triple position) for the pattern's free variables;
    a slot listed twice (?x :p ?x) must see equal values."""
    first: dict[int, int] = {}
    checks = []
    for slot, position in assign:
        if slot in first:
            checks.append(f"t[{first[slot]}] == t[{position}]")
        else:
            first[slot] = position
    cells = ", ".join(f"t[{first[i]}]" if i in first else f"mu[{i}]" for i in range(width))
    body = f"({cells},)" if width else "()"
    if checks:
        body = f"{body} if {' and '.join(checks)} else None"
    binder: Callable[[Mapping, tuple[int, int, int]], Mapping | None] = eval(f"lambda mu, t: {body}")
    return binder


class Scan(Operator):
    """Reads the index entries matching the pattern under the input bindings.
    Each position is `id << 1` (constant) or `slot << 1 | 1` (variable).
    State: the offset of the next entry to read."""

    __slots__ = ("_prepared", "offset", "pattern")

    def __init__(self, ctx: Context, pattern: tuple[int, int, int]) -> None:
        super().__init__(ctx)
        self.pattern = pattern
        self.offset = 0
        self._prepared: tuple[tuple[int, int, int], int, Iterator[tuple[int, int, int]]] | None = None

    def resolve(self, mu: Mapping) -> tuple[tuple[int, int, int], tuple[tuple[int, int], ...]]:
        """The pattern with bound variables substituted, and the free ones."""
        values = []
        free = []
        for position, code in enumerate(self.pattern):
            if code & 1:
                slot = code >> 1
                value = mu[slot]
                if not value:
                    free.append((slot, position))
                values.append(value)
            else:
                values.append(code >> 1)
        return (values[0], values[1], values[2]), tuple(free)

    def iterate(self, mu: Mapping) -> Iterator[Mapping]:
        quantum = self.ctx.quantum
        quantum.budget -= 1  # opening a scan is a step too (joins open many)
        if quantum.budget < 0:
            quantum.check()
        pattern, free = self.resolve(mu)
        bind = binder(self.ctx.width, free)
        offset = self.offset
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] == pattern and prepared[1] == offset:
            entries = prepared[2]
        else:
            entries = self.ctx.store.search(*pattern, offset)
        for triple in entries:
            quantum.budget -= 1
            if quantum.budget < 0:
                quantum.check()  # may raise: this entry stays unread
            offset += 1
            self.offset = offset
            out = bind(mu, triple)
            if out is not None:
                yield out

    def reset(self) -> None:
        self.offset = 0
        self._prepared = None

    def prepare(self, mu: Mapping) -> None:
        self._prepared = None
        if self.offset:
            pattern, _ = self.resolve(mu)
            self._prepared = (pattern, self.offset, self.ctx.store.search(*pattern, self.offset))

    def describe(self) -> pb.Operator:
        return pb.Operator(scan=self.describe_scan())

    def describe_scan(self) -> pb.Scan:
        s, p, o = self.pattern
        return pb.Scan(s=s, p=p, o=o)

    def save_state(self, out: list[int], saver: TermSaver) -> None:
        out.append(self.offset)

    def load_state(self, state: State) -> None:
        self.offset = load_count(state)

    @classmethod
    def build(cls, msg: pb.Scan, ctx: Context) -> Scan:
        for code in (msg.s, msg.p, msg.o):
            if code & 1 and code >> 1 >= ctx.width:
                raise ValueError("scan refers to an undeclared variable")
        return cls(ctx, (msg.s, msg.p, msg.o))

    def variables(self) -> set[int]:
        return {code >> 1 for code in self.pattern if code & 1}

    def sorted_on(self) -> int | None:
        s, p, o = self.pattern
        if s & 1 and self.ctx.store.sorted_by_subject(0, 0 if p & 1 else p >> 1, 0 if o & 1 else o >> 1):
            return s >> 1
        return None
