"""The worker's Prometheus metrics: one quantum's costs, as the paper measures them."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from quanta.engine.execute import QuantumPage

_MS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

QUANTUM = Histogram(
    "quanta_quantum_seconds",
    "Time a task ran in its quantum",
    ["dataset"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0),
)
QUEUE_WAIT = Histogram(
    "quanta_queue_wait_seconds",
    "Time from enqueue to a worker taking the task",
    ["dataset"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
SUSPEND = Histogram("quanta_suspend_seconds", "Time to save a plan", ["dataset"], buckets=_MS)
RESUME = Histogram("quanta_resume_seconds", "Time to load a saved plan", ["dataset"], buckets=_MS)
OVERSHOOT = Histogram(
    "quanta_quantum_overshoot_seconds", "How far past the deadline a quantum stopped", ["dataset"], buckets=_MS
)
PLAN_BYTES = Histogram(
    "quanta_saved_plan_bytes",
    "Size of saved plans",
    ["dataset"],
    buckets=(64, 128, 256, 512, 1024, 4096, 16384, 65536, 1 << 18, 1 << 20, 1 << 22),
)
PREEMPTIONS = Counter("quanta_preemptions_total", "Quanta that ended with the query suspended", ["dataset"])
RESULTS = Counter("quanta_results_total", "Solutions returned", ["dataset"])
TASKS = Counter("quanta_tasks_total", "Tasks run, by outcome (page or error kind)", ["dataset", "outcome"])
RECLAIMED = Counter("quanta_reclaimed_tasks_total", "Tasks taken over from a worker that stopped answering")
DEAD_LETTERS = Counter("quanta_dead_letters_total", "Tasks given up after repeated failures")


def observe(dataset: str, page: QuantumPage, queue_wait_s: float) -> None:
    s = page.stats
    QUANTUM.labels(dataset).observe(s.quantum_ms / 1000)
    QUEUE_WAIT.labels(dataset).observe(queue_wait_s)
    RESULTS.labels(dataset).inc(page.count)
    if s.resume_ms:
        RESUME.labels(dataset).observe(s.resume_ms / 1000)
    if page.next is not None or s.overshoot_ms:  # a query that completed late overshot too
        OVERSHOOT.labels(dataset).observe(s.overshoot_ms / 1000)
    if page.next is not None:
        PREEMPTIONS.labels(dataset).inc()
        SUSPEND.labels(dataset).observe(s.suspend_ms / 1000)
        PLAN_BYTES.labels(dataset).observe(s.plan_bytes)
