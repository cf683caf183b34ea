"""Load-test a quanta service (or any SPARQL endpoint) with WatDiv workloads.

    locust -f loadtest/locustfile.py --host http://127.0.0.1:8000 QuantaUser          # web UI on :8089
    locust -f loadtest/locustfile.py --host http://127.0.0.1:8000 --headless -u 16 -r 16 \\
        --run-time 60s --csv out/run --workload basic QuantaUser
    locust -f loadtest/locustfile.py --host http://127.0.0.1:3030 --endpoint /watdiv/sparql SparqlUser

`QuantaUser`: the preemptive protocol through the smart client (one `quantum` event per request);
`SparqlUser`: a standard SPARQL 1.1 endpoint (`--endpoint`, default quanta's /sparql/{dataset}).
Each option below has an environment variable (a Kubernetes Job sets those); loadtest/README.md
says more.
"""

from __future__ import annotations

import os
from typing import Any

import counters  # noqa: F401  (registers its listeners)
from locust import events
from users import QuantaUser, SparqlUser

__all__ = ["QuantaUser", "SparqlUser"]


# (option, environment variable, default, type, help); bool: a flag
OPTIONS: list[tuple[str, str, Any, type, str]] = [
    ("--dataset", "QUANTA_LOADTEST_DATASET", "watdiv", str, "the service's dataset name"),
    ("--workload", "QUANTA_LOADTEST_WORKLOAD", "basic", str, "basic, stress, optional, or a .jsonl workload file"),
    ("--rounds", "QUANTA_LOADTEST_ROUNDS", 1, int, "a client's workload: each template N times (0: the whole mix)"),
    ("--passes", "QUANTA_LOADTEST_PASSES", 0, int, "each client runs its workload N times, then stops (0: no end)"),
    ("--seed", "QUANTA_LOADTEST_SEED", 0, int, "seeds every client's workload"),
    ("--measure-one", "QUANTA_LOADTEST_MEASURE_ONE", False, bool,
     "client 0 runs its workload once and is measured, the others loop over the heaviest 20%% of the mix; "
     "the run ends with client 0"),
    ("--include-huge", "QUANTA_LOADTEST_INCLUDE_HUGE", False, bool, "stress mix: keep ST-p06-08 (7.8 M rows)"),
    ("--endpoint", "QUANTA_LOADTEST_ENDPOINT", "/sparql/{dataset}", str, "SparqlUser: the endpoint's path"),
    ("--plan", "QUANTA_LOADTEST_PLAN", "", str, "QuantaUser: plans by value or reference (default: the dataset's)"),
    ("--optional", "QUANTA_LOADTEST_OPTIONAL", "server", str,
     "QuantaUser: OPTIONAL by server (the workers' LeftJoin), auto (OptJoin) or bind (BindLeftJoin)"),
    ("--unreachable-retries", "QUANTA_LOADTEST_UNREACHABLE_RETRIES", 5, int,
     "QuantaUser: resends to a gateway that does not answer (about 0.1 s, doubling)"),
    ("--query-timeout", "QUANTA_LOADTEST_QUERY_TIMEOUT", 0.0, float, "a client gives up a query after N s (0: never)"),
    ("--query-log", "QUANTA_LOADTEST_QUERY_LOG", "", str, "each query as a JSON line in this file (workers: FILE.N)"),
    ("--counts-out", "QUANTA_LOADTEST_COUNTS_OUT", "", str, "the run's counts (quanta, bytes, statuses) as JSON"),
]  # fmt: skip


def _options(parser: Any) -> None:
    group = parser.add_argument_group("quanta (each also an environment variable)")
    for name, variable, default, kind, help in OPTIONS:
        value = os.environ.get(variable)
        if kind is bool:
            on = default if value is None else value.lower() in ("1", "true", "yes")
            group.add_argument(name, env_var=variable, action="store_true", default=on, help=f"{help} (${variable})")
        else:
            given = default if value is None else kind(value)
            group.add_argument(name, env_var=variable, type=kind, default=given, help=f"{help} (${variable})")


events.init_command_line_parser.add_listener(_options)
