"""The Locust users: `QuantaUser` runs queries through the smart client over the
preemptive protocol (`/v1`, one request per quantum), `SparqlUser` through a
standard SPARQL 1.1 endpoint (quanta's `/sparql`, Fuseki, any other).

Each simulated client runs a workload of its own (loadtest/workload.py) and
reports to Locust, under the query's template name:
- `quantum`: one event per request the smart client sends (QuantaUser only),
- `first-result`: the time from sending the query to its first row,
- `query`: the completion time; a failure if the query failed, was cut, or
  its row count differs from the expected one.
Counts (quanta, bytes, 429/503/504 answers, wrong, cut...) go to the master
in distributed runs (loadtest/counters.py), and every query is one line of
the query log (`--query-log`), which the experiments read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import counters
import gevent
import gevent.event
import requests
import workload
from locust import User, events, task
from locust.env import Environment
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import CSV_STATS_INTERVAL_SEC

from quanta.client import HttpTransport, QueryError, RequestEvent, Retry, SmartClient

T = TypeVar("T")


class WrongResult(Exception):
    """The query completed with another row count than expected."""


class Cut(Exception):
    """The endpoint stopped the query before its end (a time limit, an aborted response)."""


class RequestFailed(Exception):
    """A request of the smart client failed (the kind's slug); it retries what is retryable."""


@dataclass
class Outcome:
    """One query as the query log records it."""

    user: str  # the Locust user class
    client: int
    role: str  # "client", "measure" or "loader"
    name: str
    id: str
    started: float  # epoch seconds
    status: str = "ok"  # ok | wrong | cut | failed
    first_s: float | None = None  # to the first row (None: no row)
    total_s: float = 0.0
    rows: int = 0
    expected: int | None = None
    requests: int = 0
    bytes: int = 0
    service_ms: float = 0.0  # the workers' time: parse + resume + quantum + suspend, summed over its quanta
    preemption_ms: float = 0.0  # of which resume + suspend
    plan_bytes: int = 0  # saved plans sent back and forth (each page's plan, by value)
    error: str = ""
    errors: dict[str, int] = field(default_factory=dict)  # failed requests by kind (retried or not)

    def exception(self) -> Exception | None:
        if self.status == "ok":
            return None
        # one message per kind, so that Locust's error table stays short (the query log has details)
        if self.status == "wrong":
            return WrongResult("another row count than expected")
        if self.status == "cut":
            return Cut("stopped by the endpoint or the client's time limit")
        return RuntimeError(self.error.split(":", 1)[0])


class AsyncioLoop:
    """The smart client is asyncio; Locust is gevent. One event loop per
    process runs in a greenlet of its own (gevent's patched selectors make it
    cooperative), and a user waits on its coroutine's result in its own
    greenlet. Running a loop per user would not do: asyncio allows one running
    loop per OS thread, and every greenlet shares it."""

    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, coroutine: Coroutine[Any, Any, T]) -> T:
        if cls._loop is None:
            loop = asyncio.new_event_loop()
            # HttpTransport sends each request from an executor thread; gevent makes those
            # greenlets, so as many as there may be requests in flight
            loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1024))
            gevent.spawn(loop.run_forever)
            cls._loop = loop
        future = asyncio.run_coroutine_threadsafe(coroutine, cls._loop)
        done = gevent.event.AsyncResult()
        future.add_done_callback(done.set)
        try:
            done.get()
        except BaseException:  # the user is stopped (GreenletExit): stop its query too
            future.cancel()
            raise
        return future.result()


class QueryLog:
    """Every query, one JSON line (`--query-log`); each process writes its own file."""

    _file: Any = None

    @classmethod
    def write(cls, environment: Environment, outcome: Outcome) -> None:
        path = environment.parsed_options.query_log if environment.parsed_options else ""
        if not path:
            return
        if cls._file is None:
            runner = environment.runner
            index = runner.worker_index if isinstance(runner, WorkerRunner) else None
            cls._file = open(path if index is None else f"{path}.{index}", "a", buffering=1)  # noqa: SIM115
        cls._file.write(json.dumps(asdict(outcome)) + "\n")


_clients = itertools.count()


class WatDivUser(User):
    """What both users share: the client's workload, its passes, and the reporting."""

    abstract = True

    def on_start(self) -> None:
        options = self.environment.parsed_options
        runner = self.environment.runner
        worker = runner.worker_index if isinstance(runner, WorkerRunner) else 0
        self.client_index = worker * 100_000 + next(_clients)  # unique across a distributed run
        mix = workload.load(options.workload, include_huge=options.include_huge)
        if options.measure_one:  # the ICWE setup: one measuring client, loaders on the heaviest 20%
            if self.client_index == 0:
                self.role = "measure"
                self.queries = workload.client_workload(mix, 0, seed=options.seed, rounds=options.rounds)
            else:
                self.role = "loader"
                self.queries = workload.client_workload(
                    workload.heaviest(mix), self.client_index, seed=options.seed, rounds=0
                )
        else:
            self.role = "client"
            self.queries = workload.client_workload(mix, self.client_index, seed=options.seed, rounds=options.rounds)
        self.passes = {"loader": 0, "measure": 1}.get(self.role, options.passes)  # 0: no end
        self.position = 0
        self.api_key = f"loadtest-{options.seed}-{self.client_index}"  # fair use and rate limits are per client

    @task
    def next_query(self) -> None:
        """One query per task, so that a run's end (or --stop-timeout) lets the query in hand finish."""
        query = self.queries[self.position]
        self.report(query, self.run_query(query))
        self.position = (self.position + 1) % len(self.queries)
        if self.position == 0:
            self.passes -= 1
            if self.passes == 0:
                finished(self.environment, measuring=self.role == "measure")
                raise StopUser()

    def run_query(self, query: workload.Query) -> Outcome:
        raise NotImplementedError

    def report(self, query: workload.Query, outcome: Outcome) -> None:
        name = query.name if self.role != "loader" else f"loader:{query.name}"
        fire = self.environment.events.request.fire
        if outcome.first_s is not None:
            fire(request_type="first-result", name=name, response_time=outcome.first_s * 1000, response_length=0,
                 exception=None, context={})  # fmt: skip
        fire(request_type="query", name=name, response_time=outcome.total_s * 1000, response_length=outcome.bytes,
             exception=outcome.exception(), context={"rows": outcome.rows, "requests": outcome.requests})  # fmt: skip
        counters.add(queries=1, **{outcome.status: 1})
        QueryLog.write(self.environment, outcome)

    def outcome(self, query: workload.Query) -> Outcome:
        user = type(self).__name__
        return Outcome(user, self.client_index, self.role, query.name, query.id, time.time(), expected=query.expected)

    @staticmethod
    def judge(outcome: Outcome) -> None:
        if outcome.status == "ok" and outcome.expected is not None and outcome.rows != outcome.expected:
            outcome.status = "wrong"


class QuantaUser(WatDivUser):
    """The preemptive protocol through the smart client (`quanta.client.SmartClient` over
    `HttpTransport`): its `on_request` hook fires one Locust event per quantum."""

    def on_start(self) -> None:
        super().on_start()
        options = self.environment.parsed_options
        retry = Retry(unreachable_attempts=options.unreachable_retries)
        self.transport = HttpTransport(self.host or "", api_key=self.api_key, plan=options.plan or None, timeout=120)
        self.client = SmartClient(self.transport, retry=retry, optional=options.optional)

    def on_stop(self) -> None:
        self.transport.close()

    def run_query(self, query: workload.Query) -> Outcome:
        outcome = self.outcome(query)
        name = query.name if self.role != "loader" else f"loader:{query.name}"
        fire = self.environment.events.request.fire

        def on_request(event: RequestEvent) -> None:
            stats = event.stats
            work = sum(float(stats.get(k) or 0) for k in ("parse_ms", "resume_ms", "quantum_ms", "suspend_ms"))
            outcome.service_ms += work
            outcome.preemption_ms += float(stats.get("resume_ms") or 0) + float(stats.get("suspend_ms") or 0)
            if stats.get("plan") == "value":
                outcome.plan_bytes += int(stats.get("plan_bytes") or 0)
            if event.status != "ok":
                outcome.errors[event.status] = outcome.errors.get(event.status, 0) + 1
            counters.add(quanta=1, bytes=event.bytes, **({f"status:{event.status}": 1} if event.status != "ok" else {}))
            fire(request_type="quantum", name=name, response_time=event.elapsed_s * 1000, response_length=event.bytes,
                 exception=None if event.status == "ok" else RequestFailed(event.status),
                 context={"status": event.status})  # fmt: skip

        dataset = self.environment.parsed_options.dataset
        started = time.perf_counter()
        timeout = self.environment.parsed_options.query_timeout or None

        async def run() -> None:
            execution = await self.client.prepare(query.text, dataset, name=name, on_request=on_request)
            try:
                async for _ in execution.solutions():
                    if outcome.first_s is None:
                        outcome.first_s = time.perf_counter() - started
                    outcome.rows += 1
            finally:
                outcome.requests, outcome.bytes = execution.requests, execution.bytes
                await execution.aclose()

        try:
            AsyncioLoop.run(asyncio.wait_for(run(), timeout))
        except TimeoutError:
            outcome.status, outcome.error = "cut", f"client timeout after {timeout} s"
        except QueryError as error:
            outcome.status, outcome.error = "failed", f"{error.kind.slug}: {error.message}"
        except Exception as error:  # a bug or the transport's: the query is lost, the run goes on
            outcome.status, outcome.error = "failed", f"{type(error).__name__}: {error}"
        outcome.total_s = time.perf_counter() - started
        self.judge(outcome)
        return outcome


class SparqlUser(WatDivUser):
    """A standard SPARQL 1.1 endpoint at `--host` + `--endpoint` (quanta: /sparql/DATASET;
    Fuseki: /DATASET/sparql): one POST per query, results as TSV, read as they stream."""

    def on_start(self) -> None:
        super().on_start()
        self.session = requests.Session()
        self.session.trust_env = False  # never through a proxy: the targets are local
        self.session.headers.update({"Accept": "text/tab-separated-values", "X-API-Key": self.api_key})

    def on_stop(self) -> None:
        self.session.close()

    def run_query(self, query: workload.Query) -> Outcome:
        """Resends, as the smart client does, what never reached the endpoint (a refused or
        reset connection) and what it asked to resend (429 or 503 with Retry-After), up to
        --unreachable-retries times; a response cut after it began is not resent."""
        options = self.environment.parsed_options
        outcome = self.outcome(query)
        url = f"{self.host}{options.endpoint.format(dataset=options.dataset)}"
        started = time.perf_counter()
        for attempt in range(options.unreachable_retries + 1):
            retry = self.send(url, query.text, outcome, started)
            if retry is None or attempt == options.unreachable_retries:
                break
            kind, delay = retry
            outcome.errors[kind] = outcome.errors.get(kind, 0) + 1
            outcome.status, outcome.error = "ok", ""
            gevent.sleep(delay if delay is not None else min(0.1 * 2**attempt, 10.0))
        outcome.total_s = time.perf_counter() - started
        self.judge(outcome)
        return outcome

    def send(self, url: str, text: str, outcome: Outcome, started: float) -> tuple[str, float | None] | None:
        """One request; (kind, Retry-After) when it may be resent."""
        timeout = self.environment.parsed_options.query_timeout or None
        lines = 0
        outcome.requests += 1
        counters.add(requests=1)
        try:
            with self.session.post(url, data={"query": text}, stream=True, timeout=timeout) as response:
                if response.status_code != 200:
                    counters.add(**{f"status:{response.status_code}": 1})
                    retry_after = response.headers.get("Retry-After")
                    outcome.error = f"HTTP {response.status_code}: {response.text[:200]}"
                    if response.status_code in (429, 503) and retry_after is not None:
                        outcome.status = "failed"
                        return f"http-{response.status_code}", float(retry_after)
                    # a time limit before any result: Fuseki answers 503 (no Retry-After)
                    outcome.status = "cut" if response.status_code in (500, 503, 504) else "failed"
                    return None
                try:
                    for chunk in response.iter_content(65536):
                        outcome.bytes += len(chunk)
                        counters.add(bytes=len(chunk))
                        lines += chunk.count(b"\n")
                        if outcome.first_s is None and lines >= 2:
                            outcome.first_s = time.perf_counter() - started
                        if timeout and time.perf_counter() - started > timeout:  # the whole query's time
                            raise requests.exceptions.Timeout()
                finally:
                    outcome.rows = max(0, lines - 1)  # the header line
        except requests.exceptions.Timeout:
            outcome.status, outcome.error = "cut", f"client timeout after {timeout} s"
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError) as error:
            outcome.status, outcome.error = "failed", f"{type(error).__name__}: {error}"
            if outcome.rows or outcome.bytes:  # an aborted response: stopped after it began
                outcome.status = "cut"
                return None
            return "unreachable", None
        return None


def finished(environment: Environment, *, measuring: bool) -> None:
    """A client finished its passes. The run ends when every client has (or the measuring
    client, in the ICWE setup); workers tell the master, which counts for all."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.send_message("quanta-finished", {"measuring": measuring})
    else:
        _count_finished(environment, measuring)


_finished = 0


def _count_finished(environment: Environment, measuring: bool) -> None:
    global _finished
    _finished += 1
    options = environment.parsed_options
    assert options is not None
    if measuring or (not options.measure_one and _finished >= (options.num_users or 0)):
        # after Locust's CSV writer has taken its next snapshot (it writes none when quitting)
        gevent.spawn_later(CSV_STATS_INTERVAL_SEC + 0.5, environment.runner.quit)  # type: ignore[union-attr]


def _on_init(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(
            "quanta-finished", lambda msg, **_: _count_finished(environment, msg.data["measuring"])
        )


events.init.add_listener(_on_init)
