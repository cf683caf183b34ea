"""Every Redis key the service uses, with its lifetime and why.

With the queue sharded over several Redis servers (quanta.gateway.tasks.shards), each holds all of
these keys for its own tasks, workers and plans; a client's fair-use keys on the SPARQL endpoint
(`running`, `query_rate`) are in its home shard.
"""

from __future__ import annotations

PREFIX = "quanta:"

# The task queue: a stream read by one consumer group; a task stays pending
# until the worker that took it has written the reply (XACK), so a dead
# worker's task is reclaimed (XAUTOCLAIM) and run again.
TASKS = PREFIX + "tasks"
GROUP = "workers"

# Tasks that took workers down, kept for operators to inspect. The next delivery does not run such
# a task: it answers its client with an error. A delivery whose worker never replied was lost in one
# of two ways:
# - it stalled its worker (stuck past the stall limit, in code that never came back to Python): the
#   worker's stall recorder (quanta.worker.stalls) counts that against the task, in `stalls(task)`,
#   before the watchdog ends the worker. MAX_STALLS of those and the task is set aside: two, not one,
#   so that one stall of a loaded machine is forgiven;
# - its worker vanished without a stall (a native abort, out of memory, a node lost, a SIGKILL that
#   had nothing to do with the task): MAX_VANISHED of those. More than two, since most such losses
#   are not the task's doing; three, not more, so that a task that crashes workers is still answered
#   (422 dead-letter) within the gateway's reply timeout (30 s): each loss costs the reclaim delay,
#   7 s by default, and the fourth delivery answers at about 21 s.
# A graceful stop (SIGTERM) loses no delivery: the worker finishes the task in hand and replies.
DEAD_LETTERS = PREFIX + "dead"
DEAD_LETTERS_MAXLEN = 10_000
MAX_STALLS = 2
MAX_VANISHED = 3


def stalls(task_id: str) -> str:
    """How many workers a task stalled (INCR by each worker's stall recorder); deleted with the task."""
    return f"{PREFIX}stalls:{task_id}"


# Far longer than a task stays pending between two deliveries (the reclaim delay).
STALLS_TTL_S = 3600

# Workers announce themselves here (score: last heartbeat, unix seconds);
# readiness needs one seen within WORKER_STALE_S.
WORKERS = PREFIX + "workers"
WORKER_STALE_S = 10.0


def reply(task_id: str) -> str:
    """A list the gateway blocks on (BLPOP) for one task's reply."""
    return f"{PREFIX}reply:{task_id}"


# Long enough for a gateway that is still waiting; a reply nobody reads expires.
REPLY_TTL_S = 120


def plan(ref: str) -> str:
    """A saved plan kept server-side (plans by reference)."""
    return f"{PREFIX}plan:{ref}"


# How long a client may take to ask for the next page of a query whose plan
# is kept by reference (a plan larger than the dataset's plan_threshold_bytes).
PLAN_TTL_S = 900


def rate(client: str) -> str:
    """A client's token bucket (tokens, last refill)."""
    return f"{PREFIX}rate:{client}"


def running(client: str) -> str:
    """The SPARQL endpoint's queries running for a client: a sorted set of
    query ids scored by the end of their lease (ms, Redis's clock). A gateway
    renews the lease while the query streams; one that dies leaves a lease
    that simply runs out."""
    return f"{PREFIX}running:{client}"


def client_tasks(client: str) -> str:
    """A client's tasks in the stream (queued or running), for its share of the queue: a sorted
    set of entry ids scored by admission time (ms). Admission drops the ids a worker or the
    gateway has deleted from the stream; it expires 10 minutes after the client's last task."""
    return f"{PREFIX}queued:{client}"


def query_rate(client: str) -> str:
    """A client's token bucket for new SPARQL endpoint queries (the quanta of
    an admitted query are not charged to `rate`)."""
    return f"{PREFIX}query-rate:{client}"


def index_lock(index: str) -> str:
    """Held (30 min at most) by the one worker building a missing side index
    (`index`, its path) while the others on the same file wait for it. One per shard of the queue:
    with several, one worker of each may build it at once (safe: each renames a whole file)."""
    return f"{PREFIX}lock:index:{index}"
