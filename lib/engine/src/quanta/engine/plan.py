"""A compiled or resumed physical plan, and its saved form (protobuf bytes).

A saved plan is the static PhysicalPlan, serialized once when the query is
compiled and carried unchanged from quantum to quantum, plus the operators'
state as a flat list of integers. Resuming builds the operator tree from the
static part (and the native tree from it), or takes one a previous quantum of
the same query left in this process's pool, and loads the state into it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Set
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from google.protobuf.message import DecodeError

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators import Operator, SemiJoin, Tally, TopK, build
from quanta.engine.operators.native import NativeTree
from quanta.engine.quantum import Quantum
from quanta.engine.storage import TripleStore
from quanta.sparql.errors import DatasetMismatch, InvalidPlan, PlanVersion
from quanta.sparql.term_table import TermTable

MAX_POOLED_TERMS = 10_000  # computed terms a pooled plan may keep in memory
MAX_POOLED_CHARS = 4 << 20  # and their characters (a computed term may have a million)

# The layout of saved plans this release writes, and those it reads (docs/saved-plan-format.md,
# Compatibility): 0 is a plan saved before SavedPlan.format existed, in layout 1. A release that
# changes an operator's state layout writes the next number, and reads the old ones or not.
# 2: layout 1 with a Tally or TopK at the root (partial answers; releases reading only 1 refuse
# them as plan-version).
# 3: layout 1 or 2 with a LeftJoin (OPTIONAL) somewhere (releases reading up to 2 refuse them).
# 4: layout 1 to 3 with a SemiJoin ((NOT) EXISTS, MINUS) or a Closure (property path) somewhere,
# or a Tally with MIN, MAX or SAMPLE (releases reading up to 3 refuse them).
# 5: layout 1 to 4 with a Scan over a range of objects (its offset counts that range's entries).
# 6: layout 1 to 5 of a plan run whole: a HashJoin, or an exact Tally or TopK, somewhere.
FORMAT = 1
PARTIAL_FORMAT = 2
OPTIONAL_FORMAT = 3
SEMI_JOIN_FORMAT = 4
OBJECT_RANGE_FORMAT = 5
WHOLE_FORMAT = 6
READABLE_FORMATS = frozenset({0, 1, 2, 3, 4, 5, 6})
# pb.QueryForm's values, spelt out: a plan that is never saved never imports protobuf (quanta.engine.pb)
SELECT = cast("pb.QueryForm", 0)
ASK = cast("pb.QueryForm", 1)


@dataclass(slots=True)
class Plan:
    ctx: Context
    root: NativeTree
    variables: list[str]  # name per slot
    projection: list[int]  # result columns (slots)
    form: pb.QueryForm
    static: bytes | None  # the serialized PhysicalPlan: None until a compiled plan is first saved
    fixed_terms: int  # extra terms that belong to the static plan
    saved: bytes | None = None  # while pooled: the bytes its state was saved as
    format: int | None = None  # its saved layout (`_format`), once first saved

    @classmethod
    def compiled(
        cls, ctx: Context, root: Operator, variables: list[str], projection: list[int], form: pb.QueryForm
    ) -> Plan:
        return cls(ctx, NativeTree(ctx, root), variables, projection, form, None, len(ctx.terms.extra))

    @property
    def description(self) -> bytes:
        """The serialized PhysicalPlan. A compiled plan describes itself only when first saved
        (most queries end in their first quantum); the description is static, and the term
        table only grows, so it is the same then as at compile time."""
        if self.static is None:
            self.static = pb.PhysicalPlan(
                form=self.form,
                variables=self.variables,
                projection=self.projection,
                extra_terms=self.ctx.terms.extra[: self.fixed_terms],
                root=self.root.describe(),
            ).SerializeToString()
        return self.static

    @property
    def whole(self) -> bool:
        """Compiled to run whole (`compile_query(..., whole=True)`): every operator here."""
        return _has(self.root.spec, _run_whole)

    @property
    def head(self) -> list[str]:
        return [self.variables[slot] for slot in self.projection]

    def save(self) -> bytes:
        """Suspend: the plan and its state as protobuf bytes (between mappings)."""
        if self.format is None:
            self.format = _format(self.root)
        saver = self.ctx.terms.saver(self.fixed_terms)
        state = self.root.save_state(saver)
        store = self.ctx.store
        rest = pb.SavedPlan(
            dataset=pb.DatasetVersion(name=store.name, version=store.version),
            plan=self.description,
            state_terms=saver.extra,
            format=self.format,
        )
        return rest.SerializeToString() + state  # a message's fields may come in any order

    @classmethod
    def load(cls, data: bytes, store: TripleStore, quantum: Quantum) -> Plan:
        """Resume a saved plan; refuse one for another dataset or file build."""
        kept = POOL.take_saved(store, data)
        if kept is not None:  # this process saved these very bytes: the plan is in that state
            kept.ctx.quantum = quantum
            return kept
        try:
            msg = pb.SavedPlan.FromString(data)
        except DecodeError as error:
            raise InvalidPlan(f"saved plan does not decode: {error}") from error
        if msg.format not in READABLE_FORMATS:
            raise PlanVersion(msg.format, READABLE_FORMATS)
        if msg.dataset.name != store.name or msg.dataset.version != store.version:
            raise DatasetMismatch(
                f"{store.name} (build {store.version:016x})", f"{msg.dataset.name} (build {msg.dataset.version:016x})"
            )
        physical = _physical_plan(msg.plan)
        width = len(physical.variables)
        pooled = POOL.take(store, msg.plan)
        try:
            if pooled:
                ctx, root = pooled.ctx, pooled.root
                ctx.quantum = quantum
            else:
                ctx = Context(store, quantum, TermTable(store, list(physical.extra_terms)), width)
                root = NativeTree(ctx, build(physical.root, ctx))
            ctx.terms.restore_terms(len(physical.extra_terms), list(msg.state_terms))
            root.load_state(data)
            projection = list(physical.projection)
            if any(slot >= width for slot in projection):
                raise ValueError("projection of an undeclared variable")
        except (ValueError, KeyError, IndexError) as error:
            raise InvalidPlan(f"saved plan is malformed: {error}") from error
        return cls(ctx, root, list(physical.variables), projection, physical.form, msg.plan, len(physical.extra_terms))

    def release(self, saved: bytes | None = None) -> None:
        """Done with this quantum: leave the operator tree for the next one
        (unless its term table has grown large: start afresh then). `saved`:
        the bytes this state was just saved as, so that resuming from exactly
        them takes the plan as it stands."""
        if len(self.ctx.terms.extra) <= MAX_POOLED_TERMS and self.ctx.terms.extra_chars <= MAX_POOLED_CHARS:
            self.saved = saved
            POOL.give(self.ctx.store, self)


class PlanPool:
    """Plans whose quantum ended in this process, keyed by the static plan's
    bytes, so the next quantum of the same query loads its state into their
    operator trees instead of rebuilding (resume is then ~10 µs); and by the
    bytes their state was saved as, so that the next quantum of a query this
    process ran last skips even the loading (a dictionary lookup). A plan is
    handed to one quantum at a time; an absent entry just means building anew."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.free: OrderedDict[tuple[int, bytes], list[Plan]] = OrderedDict()
        self.by_state: dict[tuple[int, bytes], Plan] = {}

    def take(self, store: TripleStore, description: bytes) -> Plan | None:
        plans = self.free.get((id(store), description))
        if not plans:
            return None
        plan = plans.pop()
        self._forget(id(store), plan)
        return plan

    def take_saved(self, store: TripleStore, data: bytes) -> Plan | None:
        """The pooled plan whose state was saved as `data`, if any."""
        plan = self.by_state.pop((id(store), data), None)
        if plan is None:
            return None
        plan.saved = None
        plans = self.free.get((id(store), plan.description), [])
        for i, pooled in enumerate(plans):
            if pooled is plan:
                del plans[i]
                return plan
        return None

    def give(self, store: TripleStore, plan: Plan) -> None:
        key = (id(store), plan.description)
        self.free.setdefault(key, []).append(plan)
        self.free.move_to_end(key)
        if plan.saved is not None:
            self.by_state[(id(store), plan.saved)] = plan
        while len(self.free) > self.size:
            (store_id, _), evicted = self.free.popitem(last=False)
            for old in evicted:
                self._forget(store_id, old)

    def _forget(self, store_id: int, plan: Plan) -> None:
        if plan.saved is not None and self.by_state.get((store_id, plan.saved)) is plan:
            del self.by_state[(store_id, plan.saved)]
        plan.saved = None


POOL = PlanPool()


@lru_cache(maxsize=1024)
def _physical_plan(data: bytes) -> pb.PhysicalPlan:
    """Parsed once per process: every quantum of a query carries the same bytes."""
    try:
        return pb.PhysicalPlan.FromString(data)
    except DecodeError as error:
        raise InvalidPlan(f"physical plan does not decode: {error}") from error


def _format(tree: NativeTree) -> int:
    """The oldest layout that holds this plan: a reader of an older one would misread it."""
    if _has(tree.spec, _run_whole):
        return WHOLE_FORMAT
    if _has(tree.spec, _reads_object_range):
        return OBJECT_RANGE_FORMAT
    if _has(tree.spec, _tagged(FORMAT_4_OPERATORS)) or (isinstance(tree.operator, Tally) and tree.operator.reduced):
        return SEMI_JOIN_FORMAT
    if _has(tree.spec, _tagged({"optional"})):
        return OPTIONAL_FORMAT
    return PARTIAL_FORMAT if isinstance(tree.operator, Tally | TopK) else FORMAT


def _has(spec: object, found: Callable[[tuple[Any, ...]], bool]) -> bool:
    """Whether an operator `found` holds for is in a native spec (nested tuples and lists, each
    tuple's tag first)."""
    if isinstance(spec, tuple):
        return (bool(spec) and found(spec)) or any(_has(part, found) for part in spec[1:])
    return isinstance(spec, list) and any(_has(part, found) for part in spec)


def _tagged(tags: Set[str]) -> Callable[[tuple[Any, ...]], bool]:
    return lambda operator: operator[0] in tags


def _run_whole(operator: tuple[Any, ...]) -> bool:
    """An operator of plans run whole alone: a hash join, an exact tally or top-k (their
    `exact` flag last)."""
    return operator[0] == "hashjoin" or (operator[0] in ("tally", "topk") and operator[-1] is True)


def _reads_object_range(operator: tuple[Any, ...]) -> bool:
    """A scan of a range of objects (`("scan", pattern, objects)`)."""
    return operator[0] == "scan" and len(operator) > 2 and operator[2] is not None


FORMAT_4_OPERATORS = frozenset({*SemiJoin.KINDS, "closure"})  # the operators format 4 brought
