"""Bounds on reading a query, whatever parser does it (spargebra, in the native core, today).

Three guards, in order, around "parse" (and whatever else walks a fresh
query's tree: the client's planner, the engine's compiler):

1. `check`: one linear pass over the text, before any parser, refuses what
   is past an explicit limit (nesting of brackets, number of operators,
   LIMIT/OFFSET past 2^63-1) and what is not text (a lone surrogate, raw or
   as a `\\u` escape), with the limit or the position in the message.
2. `run` / `run_async`: the work runs on a parse thread, never on the
   caller's (the gateway's event loop stays free), with a deep stack and a
   raised recursion limit (valid deep queries parse), and a budget of CPU
   time (a loaded machine does not make a query too complex): past it the
   work is abandoned with `QueryTooComplex`; past the budget plus
   WALL_GRACE_S of wall time with CPU time left, with `ParserBusy` (503,
   retryable, never remembered): a worker's stall limit counts wall time.
3. `Refusals`: what was refused is remembered (by a digest of the text), so
   the same refused query costs nothing the second time.

The budget is enforced by raising an exception *inside* the parse thread
(`PyThreadState_SetAsyncExc`) from a watchdog thread: it costs nothing while
the parse runs (a `sys.setprofile` deadline check made rdflib 2-4x slower),
and it interrupts any Python code. A native parser (spargebra) would not be
interrupted mid-call, but it is linear in the text, which `check` bounds.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf.message import DecodeError

from quanta.native import _core
from quanta.sparql.errors import ParserBusy, QuantaError, QuerySyntaxError, QueryTooComplex

if TYPE_CHECKING:
    from concurrent.futures import Future

T = TypeVar("T")

MAX_INTEGER = (1 << 63) - 1  # LIMIT and OFFSET: the engine's saved plans hold them as int64
# Deep but valid queries parse (rdflib needs ~40 frames per nested bracket, one per UNION
# branch); not higher, since the limit holds for every thread and the main thread's C stack is 8 MiB.
RECURSION_LIMIT = 10_000
# A parse ends within its budget plus this much wall time, whatever CPU time it got (ParserBusy):
# a worker's stall limit (QUANTA_WORKER_STALL_S, 5 s at least) counts wall time.
WALL_GRACE_S = 0.5
STACK_BYTES = 256 << 20  # a parse thread's stack (address space: pages are used as touched)


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What one query may ask of the parser. Read from the environment (both roles)."""

    max_depth: int = 128  # QUANTA_MAX_QUERY_DEPTH: brackets ( { [ nested in each other
    max_operators: int = 2_000  # QUANTA_MAX_QUERY_OPERATORS: UNION, OPTIONAL, MINUS and operators (+ = && ...)
    # QUANTA_PARSE_BUDGET_S: CPU time to parse (and plan or compile) one query (a 500-branch UNION: ~1.7 s)
    budget_s: float = 3.0
    threads: int = 2  # QUANTA_PARSE_THREADS: queries parsed at once in one process

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ParseLimits:
        def read(name: str, kind: Callable[[str], Any], default: Any) -> Any:
            raw = env.get(name) or ""
            try:
                value = kind(raw) if raw else default
            except ValueError:
                raise ValueError(f"{name}: not a number: {raw!r}") from None
            if value <= 0:
                raise ValueError(f"{name} must be positive")
            return value

        default = cls()
        return cls(
            max_depth=read("QUANTA_MAX_QUERY_DEPTH", int, default.max_depth),
            max_operators=read("QUANTA_MAX_QUERY_OPERATORS", int, default.max_operators),
            budget_s=read("QUANTA_PARSE_BUDGET_S", float, default.budget_s),
            threads=read("QUANTA_PARSE_THREADS", int, default.threads),
        )


@lru_cache(maxsize=1)
def limits() -> ParseLimits:
    """This process's limits (the environment, read once; a bad value fails at start)."""
    return ParseLimits.from_env(os.environ)


# Not characters: a surrogate (raw, or a \u / \U escape of one) or an escape past U+10FFFF.
_NOT_TEXT = re.compile(
    r"[\ud800-\udfff]|(?<!\\)(?:\\\\)*\\(?:u[dD][89a-fA-F][0-9a-fA-F]{2}|U(?!00(?:0[0-9a-fA-F]|10))[0-9a-fA-F]{8}"
    r"|U0000[dD][89a-fA-F][0-9a-fA-F]{2})"
)


def check(text: str, bounds: ParseLimits | None = None) -> tuple[int, int]:
    """Refuse, before any parser, a text past the limits or with what is not a character;
    the deepest nesting of brackets it has, and its number of operators."""
    bounds = bounds or limits()
    bad = None if text.isascii() and "\\" not in text else _NOT_TEXT.search(text)
    if bad is not None:
        line, column = _position(text, bad.start())
        found = bad.group()
        shown = found[found.rfind("\\") :] if len(found) > 1 else f"U+{ord(found):04X}"
        raise QuerySyntaxError(f"{shown} is not a character (a lone surrogate, or past U+10FFFF)", line, column)
    # one pass of the native core over the tokens: what is skipped whole (comments, strings,
    # IRIs), brackets, words, operators (`scan_text` in lib/native/src/query.rs)
    deepest, operators, past = _core.scan_query(text, bounds.max_depth, MAX_INTEGER)
    if past is not None and past[0] == "depth":
        raise QueryTooComplex(
            f"the query nests brackets more than {bounds.max_depth} deep (at character {past[1]});"
            f" the limit is {bounds.max_depth} (QUANTA_MAX_QUERY_DEPTH)",
            "QUANTA_MAX_QUERY_DEPTH",
        )
    if past is not None:
        _, counted, word = past
        raise QueryTooComplex(
            f"{counted} {word} is past the largest {counted} this service takes ({MAX_INTEGER})", counted
        )
    if operators > bounds.max_operators:
        raise QueryTooComplex(
            f"the query has {operators} operators (UNION, OPTIONAL, MINUS, + - * / = < > ! && ||);"
            f" the limit is {bounds.max_operators} (QUANTA_MAX_QUERY_OPERATORS)",
            "QUANTA_MAX_QUERY_OPERATORS",
        )
    return deepest, operators


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


class Refusals:
    """The errors of refused queries by a digest of their text (bounded, least recently used first out).
    Each is kept as what remakes it (type and fields): not the parser's frames, nor the text."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._errors: OrderedDict[bytes, Callable[[], QuantaError]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, text: str) -> QuantaError | None:
        """A new copy of the error `text` was refused with, if it was."""
        key = self.key(text)
        with self._lock:
            remake = self._errors.get(key)
            if remake is None:
                return None
            self._errors.move_to_end(key)
        return remake()

    def put(self, text: str, error: QuerySyntaxError | QueryTooComplex) -> None:
        if isinstance(error, QuerySyntaxError):
            message, line, column = error.message, error.line, error.column
            remake: Callable[[], QuantaError] = lambda: QuerySyntaxError(message, line, column)  # noqa: E731
        else:
            detail, limit = str(error), error.limit
            remake = lambda: QueryTooComplex(detail, limit)  # noqa: E731
        key = self.key(text)
        with self._lock:
            self._errors[key] = remake
            self._errors.move_to_end(key)
            while len(self._errors) > self.size:
                self._errors.popitem(last=False)


class _Abandoned(BaseException):
    """Raised inside a parse thread past its budget (BaseException: `except Exception` lets it through)."""


@dataclass(eq=False, slots=True)
class _Job:
    call: Callable[[], Any]
    future: Future[Any]
    budget_s: float
    clock: int = time.CLOCK_MONOTONIC  # the lane's CPU-time clock where there is one
    started: float = 0.0  # on `clock`
    wall_started: float = 0.0
    fired: bool = False
    busy: bool = False  # fired on wall time with CPU budget left

    def cpu_left(self) -> float:
        return self.budget_s - (time.clock_gettime(self.clock) - self.started)

    def left(self) -> float:
        """The budget left: CPU time, and the budget plus WALL_GRACE_S of wall time."""
        wall = self.budget_s + WALL_GRACE_S - (time.monotonic() - self.wall_started)
        return min(self.cpu_left(), wall)


def _set_async_exc(ident: int, exception: type[BaseException] | None) -> None:
    """Raise `exception` in thread `ident` at its next bytecode; None cancels one not yet raised."""
    import ctypes  # here, as Future in `submit`: a query read in place starts no parse thread

    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), None if exception is None else ctypes.py_object(exception)
    )


class ParseThreads:
    """Threads that run parses, each under a time budget (see the module's doc)."""

    def __init__(self, threads: int) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._running: dict[int, _Job] = {}  # thread ident -> its job
        # A plain lock (C, no Python frame in `with`) where an interrupt may land: one landing
        # inside Condition.__enter__ (Python) would leave the lock held for ever.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.idents: set[int] = set()
        if sys.getrecursionlimit() < RECURSION_LIMIT:
            sys.setrecursionlimit(RECURSION_LIMIT)
        previous = threading.stack_size(STACK_BYTES)
        try:
            for n in range(threads):
                thread = threading.Thread(target=self._lane, name=f"quanta-parse-{n}", daemon=True)
                thread.start()
                assert thread.ident is not None
                self.idents.add(thread.ident)
        finally:
            threading.stack_size(previous)
        threading.Thread(target=self._watch, name="quanta-parse-watchdog", daemon=True).start()

    def submit(self, call: Callable[[], T], budget_s: float) -> Future[T]:
        from concurrent.futures import Future  # here: it imports logging, which `quanta query` does without

        future: Future[T] = Future()
        self._jobs.put(_Job(call, future, budget_s))
        return future

    def _lane(self) -> None:
        ident = threading.get_ident()
        clock = _cpu_clock(ident)
        while True:
            job = self._jobs.get()
            if not job.future.set_running_or_notify_cancel():
                continue
            with self._changed:
                job.clock, job.started, job.wall_started = clock, time.clock_gettime(clock), time.monotonic()
                self._running[ident] = job
                self._changed.notify()
            result: Any = None
            error: BaseException | None = None
            try:
                try:
                    result = job.call()
                except _Abandoned:
                    error = _over_budget(job)
                except BaseException as failure:  # the caller's to handle
                    error = failure
                with self._lock:
                    del self._running[ident]
                _set_async_exc(ident, None)  # a budget spent just as the job ended: cancel its exception
            except _Abandoned:  # delivered after the job's own code ended: its outcome stands
                with self._lock:
                    self._running.pop(ident, None)
            if error is None:
                job.future.set_result(result)
            else:
                job.future.set_exception(error)
            del job, result, error

    def _watch(self) -> None:
        """Interrupt each job past its budget (once: the exception unwinds the job). CPU time
        only passes as fast as wall time, so waiting for the least time left never overshoots."""
        with self._changed:
            while True:
                wait: float | None = None
                for ident, job in self._running.items():
                    if job.fired:
                        continue
                    left = job.left()
                    if left <= 0:
                        job.fired, job.busy = True, job.cpu_left() > 0
                        _set_async_exc(ident, _Abandoned)
                    else:
                        wait = left if wait is None else min(wait, left)
                self._changed.wait(wait)


def _cpu_clock(ident: int) -> int:
    """The CPU-time clock of thread `ident` (the budget is CPU time: a loaded machine
    does not make a query too complex), or the monotonic clock where there is none."""
    try:
        clock = time.pthread_getcpuclockid(ident)
        time.clock_gettime(clock)  # under gevent (Locust's users) a "thread" is a greenlet: no clock of its own
        return clock
    except (AttributeError, OSError):
        return time.CLOCK_MONOTONIC


def _over_budget(job: _Job) -> QueryTooComplex | ParserBusy:
    """The query's fault (past its CPU budget), or the machine's (past the wall time first)."""
    if not job.busy:
        return QueryTooComplex(
            f"reading the query took more than {job.budget_s:g} s of CPU time,"
            " the parse budget (QUANTA_PARSE_BUDGET_S)",
            "QUANTA_PARSE_BUDGET_S",
        )
    wall = job.budget_s + WALL_GRACE_S
    return ParserBusy(f"the query could not be read within {wall:g} s on this busy service; send it again later")


_threads: ParseThreads | None = None
_start = threading.Lock()


def threads() -> ParseThreads:
    """This process's parse threads (started on first use)."""
    global _threads
    with _start:
        if _threads is None:
            _threads = ParseThreads(limits().threads)
        return _threads


def run(call: Callable[[], T]) -> T:
    """`call()` on a parse thread under the parse budget; the calling thread waits.
    On a parse thread already (a parse inside a plan), `call()` runs in place, in the outer budget."""
    pool = threads()
    if threading.get_ident() in pool.idents:
        return call()
    return pool.submit(lambda: _deep(call), limits().budget_s).result()


async def run_async(call: Callable[[], T]) -> T:
    """`call()` on a parse thread under the parse budget; the event loop runs meanwhile."""
    import asyncio  # here: `quanta query` never needs it (about 50 ms at start)

    return await asyncio.wrap_future(threads().submit(lambda: _deep(call), limits().budget_s))


def in_place(call: Callable[[], T]) -> T:
    """`call()` on the calling thread, its nesting errors the query's (as on a parse thread): for
    texts whose reading is known to be short (`quanta.sparql.parse.INLINE_CHARS`)."""
    return _deep(call)


def _deep(call: Callable[[], T]) -> T:
    """Nesting past what a parse thread (RECURSION_LIMIT frames) or a saved plan (protobuf
    decodes 100 levels: an expression tree of ~50 operators) holds is the query's, not a failure."""
    try:
        return call()
    except (RecursionError, DecodeError) as error:
        if isinstance(error, RecursionError):
            what = f"to be read in {RECURSION_LIMIT} nested calls (deep brackets, or long chains of patterns)"
        else:
            what = "for a saved plan (operators and expressions past 100 levels)"
        raise QueryTooComplex(f"the query nests too deeply {what}", "QUANTA_MAX_QUERY_DEPTH") from None
