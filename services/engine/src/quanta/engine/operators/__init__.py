"""Preemptable physical operators, one module per kind, and `build`, which
makes an operator tree from its static description (`Operator.describe`)."""

from __future__ import annotations

from collections.abc import Callable

from quanta.engine.context import Context
from quanta.engine.operators.base import Operator
from quanta.engine.operators.expression import Extend, Filter
from quanta.engine.operators.joins import IndexJoin, MergeJoin
from quanta.engine.operators.scan import Scan
from quanta.engine.operators.slice import Slice
from quanta.engine.operators.union import Union
from quanta.engine.operators.values import Values
from quanta.plan.v1 import plan_pb2 as pb

__all__ = ["Extend", "Filter", "IndexJoin", "MergeJoin", "Operator", "Scan", "Slice", "Union", "Values", "build"]

# oneof field of pb.Operator -> builder from that message
BUILDERS: dict[str, Callable[..., Operator]] = {
    "scan": Scan.build,
    "index_join": IndexJoin.build,
    "merge_join": MergeJoin.build,
    "union": Union.build,
    "filter": Filter.build,
    "values": Values.build,
    "extend": Extend.build,
    "slice": Slice.build,
}


def build(msg: pb.Operator, ctx: Context) -> Operator:
    kind = msg.WhichOneof("op")
    if kind is None:
        raise ValueError("empty operator")
    return BUILDERS[kind](getattr(msg, kind), ctx)
