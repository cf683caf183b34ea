"""Preemptable physical operators, one module per kind, and `build`, which
makes an operator tree from its static description (`Operator.describe`).

FILTER and BIND (`quanta.engine.operators.expression`) are imported only by a
plan that has one: they bring the expression evaluator and protobuf, about half
of a fresh `quanta query`'s imports, which a plan without expressions never needs."""

from __future__ import annotations

from collections.abc import Callable

from quanta.engine import pb
from quanta.engine.context import Context
from quanta.engine.operators.base import Operator
from quanta.engine.operators.closure import Closure
from quanta.engine.operators.joins import HashJoin, IndexJoin, LeftJoin, MergeJoin, SemiJoin
from quanta.engine.operators.partial import Tally, TopK
from quanta.engine.operators.scan import Scan
from quanta.engine.operators.slice import Slice
from quanta.engine.operators.union import Union
from quanta.engine.operators.values import Values

__all__ = [
    "Closure",
    "HashJoin",
    "IndexJoin",
    "LeftJoin",
    "MergeJoin",
    "Operator",
    "Scan",
    "SemiJoin",
    "Slice",
    "Tally",
    "TopK",
    "Union",
    "Values",
    "build",
]


def _filter(msg: pb.Filter, ctx: Context) -> Operator:
    from quanta.engine.operators.expression import Filter

    return Filter.build(msg, ctx)


def _extend(msg: pb.Extend, ctx: Context) -> Operator:
    from quanta.engine.operators.expression import Extend

    return Extend.build(msg, ctx)


# oneof field of pb.Operator -> builder from that message
BUILDERS: dict[str, Callable[..., Operator]] = {
    "scan": Scan.build,
    "index_join": IndexJoin.build,
    "merge_join": MergeJoin.build,
    "union": Union.build,
    "filter": _filter,
    "values": Values.build,
    "extend": _extend,
    "slice": Slice.build,
    "tally": Tally.build,
    "top_k": TopK.build,
    "left_join": LeftJoin.build,
    "semi_join": SemiJoin.build,
    "closure": Closure.build,
    "hash_join": HashJoin.build,
}


def build(msg: pb.Operator, ctx: Context) -> Operator:
    kind = msg.WhichOneof("op")
    if kind is None:
        raise ValueError("empty operator")
    return BUILDERS[kind](getattr(msg, kind), ctx)
