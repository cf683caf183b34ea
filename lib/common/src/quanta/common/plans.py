"""Saved plans kept by reference in Redis, so that replays cannot multiply them.

A `next` token can be sent any number of times (a retry after a timeout must
work), and each time a worker runs the quantum again and keeps the plan it
ends with. Under a fresh key per run, one token replayed in a loop filled
Redis with copies for PLAN_TTL_S each (2.9 MB -> 435 MB in a minute). So the
key is derived from the task's input (the plan or reference it resumed, or,
for a new query, the task itself: new queries are charged to the rate limit):
every run from the same input writes the same key, and Redis holds one plan
per input, whatever the number of replays.

Two runs from one input can stop at different places (the quantum is a
time), so the reference also carries a digest of the plan it names: a token
whose plan was replaced by a later run of the same input is refused as
expired (410 plan-expired), never resumed from another state. A run that
stops where the last one did writes the same bytes, and every token of it
stays valid.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import redis

from quanta.common import keys
from quanta.queue.v1 import queue_pb2


def keep(client: redis.Redis, task: queue_pb2.Task, plan: bytes) -> str:
    """Keep `plan`, the state `task` ended its quantum in, for PLAN_TTL_S; its reference."""
    slot = _b64(hashlib.sha256(_input(task)).digest()[:16])
    client.set(keys.plan(slot), plan, ex=keys.PLAN_TTL_S)
    return f"{slot}.{_digest(plan)}"


def load(client: redis.Redis, ref: str) -> bytes | None:
    """The plan `ref` names; None once it expired or was replaced by another run of its input."""
    slot, _, digest = ref.partition(".")
    kept = client.get(keys.plan(slot))
    if not isinstance(kept, bytes):
        return None
    # References without a digest were issued by an earlier version (one key per run): still valid.
    if digest and not hmac.compare_digest(_digest(kept), digest):
        return None
    return kept


def _input(task: queue_pb2.Task) -> bytes:
    """What the task resumes from, and what else shapes the plan it ends with."""
    kind = task.WhichOneof("input")
    if kind == "plan":
        state = task.plan
    elif kind == "plan_ref":
        state = task.plan_ref.encode()
    else:
        state = task.id.encode()
    shape = "\0".join((kind or "", task.dataset, task.graph, ",".join(task.columns))).encode()
    return shape + b"\0" + state


def _digest(plan: bytes) -> str:
    return _b64(hashlib.sha256(plan).digest()[:12])


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
