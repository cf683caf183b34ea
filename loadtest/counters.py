"""Counts that Locust's statistics do not keep (quanta, bytes, answers by status,
queries by outcome), summed over a distributed run: each worker ships what it
counted since its last report (`report_to_master`), the master adds it up
(`worker_report`). `--counts-out FILE` writes the totals as JSON at the end;
the web UI shows them at /quanta/counts."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from locust import events
from locust.env import Environment
from locust.runners import WorkerRunner

_pending: Counter[str] = Counter()  # a worker's counts not yet shipped
totals: Counter[str] = Counter()  # the master's (or a local run's) totals


def add(**counts: int) -> None:
    _pending.update(counts)
    totals.update(counts)


def _ship(client_id: str, data: dict[str, Any]) -> None:
    data["quanta_counts"] = dict(_pending)
    _pending.clear()


def _receive(client_id: str, data: dict[str, Any]) -> None:
    totals.update(data.get("quanta_counts", {}))


def _routes(environment: Environment, **_: Any) -> None:
    if environment.web_ui is not None and environment.web_ui.app is not None:
        environment.web_ui.app.add_url_rule("/quanta/counts", "quanta_counts", lambda: dict(totals))


def _write(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        return
    path = environment.parsed_options.counts_out if environment.parsed_options else ""
    summary = json.dumps(dict(sorted(totals.items())))
    print(f"quanta counts: {summary}", flush=True)
    if path:
        with open(path, "w") as f:
            f.write(summary + "\n")


events.report_to_master.add_listener(_ship)
events.worker_report.add_listener(_receive)
events.init.add_listener(_routes)
events.quitting.add_listener(_write)
