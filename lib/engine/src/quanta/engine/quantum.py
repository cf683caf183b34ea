"""The time quantum: a deadline checked every few steps, not on every triple."""

from __future__ import annotations

import time

# Scans decrement `Quantum.budget` once per index entry read and per scan
# opened; the clock is read only when it runs out. 64 steps of ~1 µs each
# bounds the overshoot well under a millisecond.
CHECK_EVERY = 64


class QuantumExpired(Exception):
    """Raised from inside a scan, between two index entries, when time is up."""


class Quantum:
    """A deadline for one quantum. `seconds=None` never expires. `cpu`: measured on the
    thread's CPU clock rather than the wall clock (`execute`'s `cpu_clock`)."""

    __slots__ = ("budget", "cpu", "deadline", "now", "overshoot", "seconds")

    def __init__(self, seconds: float | None, cpu: bool = False) -> None:
        self.seconds = seconds
        self.cpu = cpu
        self.now = time.thread_time if cpu else time.perf_counter
        self.deadline = float("inf")
        self.budget = CHECK_EVERY
        self.overshoot = 0.0

    def on_cpu(self) -> None:
        """Measure on the thread's CPU clock from now on (before `start`)."""
        self.cpu = True
        self.now = time.thread_time

    def start(self) -> None:
        """Start the clock (after the plan is loaded: loading is not charged)."""
        if self.seconds is not None:
            self.deadline = self.now() + self.seconds
        self.budget = CHECK_EVERY

    def check(self) -> None:
        """Called when the budget runs out: raise if the deadline has passed."""
        if self.now() >= self.deadline:
            self.budget = 0
            raise QuantumExpired
        self.budget = CHECK_EVERY

    def stop(self) -> None:
        """The quantum has stopped running: `overshoot` is how far past the deadline it did, measured
        now rather than at the last clock check, so work that never reached a check (one long
        expression, a query that completed late) counts too."""
        self.overshoot = max(0.0, self.now() - self.deadline)
