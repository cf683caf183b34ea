"""The physical plan's operators, as the planner builds them and the saved plan
describes them (`describe`, and `build` in `quanta.engine.operators` for the way
back). They run natively: `spec` describes each to the native core
(`quanta.engine.operators.native`), which iterates them as preemptable
iterators (Definition 3.1 of the SaGe paper), suspends them between any two
steps and saves their state (`lib/native/src/exec.rs`).
"""

from __future__ import annotations

from typing import Any

from quanta.engine import pb
from quanta.engine.context import Context

Spec = tuple[Any, ...]  # an operator as `quanta.native._core.NativeHdt.pipeline` reads it


class Operator:
    __slots__ = ("ctx",)

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def describe(self) -> pb.Operator:
        """The static description (what the optimizer chose)."""
        raise NotImplementedError

    def spec(self) -> Spec:
        """This operator and its inputs as the native core builds them."""
        raise NotImplementedError

    def variables(self) -> set[int]:
        """Slots this operator may bind."""
        raise NotImplementedError

    def sorted_on(self) -> int | None:
        """The slot whose ids ascend in this operator's output, if any."""
        return None
