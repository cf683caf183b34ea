"""The saved plan's protobuf messages (`quanta.plan.v1.plan_pb2`), imported when one is first used.

Importing protobuf is about a fifth of a fresh `quanta query`'s time, and a plan only needs
it to be saved or loaded (most queries end within their first quantum) or to hold an
expression (`quanta.sparql.expressions`). The engine's modules name the messages through
this module (`from quanta.engine import pb`; `pb.Operator(...)`), which imports plan_pb2 on
the first name asked of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the type checker sees plan_pb2's names (and no others) here
    from quanta.plan.v1.plan_pb2 import *  # noqa: F403
else:

    def __getattr__(name: str) -> Any:
        from quanta.plan.v1 import plan_pb2

        value = getattr(plan_pb2, name)
        globals()[name] = value  # asked once: later reads are plain module attributes
        return value
