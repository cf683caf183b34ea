"""Write the Grafana dashboards of charts/quanta/files/dashboards/ (JSON is generated, not hand-edited).

    python scripts/k8s/dashboards.py           # rewrite the files
    python scripts/k8s/dashboards.py --check   # exit 1 if the files differ from what this writes

Each panel is a title, a unit and PromQL expressions with their legends; tests/chart/ checks every
expression against promtool and a Prometheus that scraped the real service.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[2] / "charts" / "quanta" / "files" / "dashboards"
RATE = "$__rate_interval"


def quantiles(metric: str, qs: tuple[float, ...] = (0.5, 0.95)) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by (le) (rate({metric}_bucket[{RATE}])))", f"p{round(q * 100)}") for q in qs]


SERVICE = {
    "uid": "quanta-service",
    "title": "quanta: service",
    "description": "Queue, workers, throughput and HTTP answers of a quanta release.",
    "panels": [
        # The queue's gauges: a series per gateway and shard; every gateway reads the same shards
        # (max by shard), the shards add up (sum).
        (
            "Queue depth and lag",
            "short",
            [
                ("sum(max by (shard) (quanta_queue_depth))", "depth (queued + running)"),
                ("sum(max by (shard) (quanta_queue_lag))", "lag (not yet delivered)"),
                ("sum(max by (shard) (quanta_queue_pending))", "pending (running)"),
            ],
        ),
        (
            "Workers against queue depth",
            "short",
            [
                ("sum(max by (shard) (quanta_workers))", "live workers"),
                ("sum(max by (shard) (quanta_queue_depth))", "queue depth"),
            ],
        ),
        (
            "Quanta per second",
            "ops",
            [
                ("sum(rate(quanta_tasks_total[$__rate_interval]))", "quanta"),
                ("sum(rate(quanta_preemptions_total[$__rate_interval]))", "ended suspended"),
            ],
        ),
        ("Results per second", "short", [("sum(rate(quanta_results_total[$__rate_interval]))", "solutions/s")]),
        (
            "HTTP answers by status",
            "reqps",
            [
                ("sum by (status) (rate(quanta_http_requests_total[$__rate_interval]))", "{{status}}"),
            ],
        ),
        ("Request latency (queue wait and quantum included)", "s", quantiles("quanta_http_request_duration_seconds")),
        (
            "Refused requests by reason",
            "reqps",
            [
                ("sum by (reason) (rate(quanta_rejected_total[$__rate_interval]))", "{{reason}}"),
            ],
        ),
        (
            "Queries started and completed",
            "ops",
            [
                ("sum(rate(quanta_queries_started_total[$__rate_interval]))", "started"),
                ("sum(rate(quanta_queries_completed_total[$__rate_interval]))", "completed"),
            ],
        ),
        (
            "Queue lag and live workers per shard",
            "short",
            [
                ("max by (shard) (quanta_queue_lag)", "lag, shard {{shard}}"),
                ("max by (shard) (quanta_workers)", "workers, shard {{shard}}"),
            ],
        ),
        ("Redis reached per shard (1: yes)", "short", [("max by (shard) (quanta_redis_up)", "shard {{shard}}")]),
    ],
}

PREEMPTION = {
    "uid": "quanta-preemption",
    "title": "quanta: preemption",
    "description": "What preemption costs: queue wait, quantum, overshoot, suspend and resume, saved plan sizes.",
    "panels": [
        ("Queue wait", "s", quantiles("quanta_queue_wait_seconds")),
        ("Time in the quantum", "s", quantiles("quanta_quantum_seconds")),
        ("Quantum overshoot (past the deadline)", "s", quantiles("quanta_quantum_overshoot_seconds", (0.5, 0.99))),
        (
            "Suspend and resume",
            "s",
            [
                (e, f"{name} {legend}")
                for name, metric in (("suspend", "quanta_suspend_seconds"), ("resume", "quanta_resume_seconds"))
                for e, legend in quantiles(metric)
            ],
        ),
        ("Saved plan size", "bytes", quantiles("quanta_saved_plan_bytes", (0.5, 0.95, 0.99))),
        (
            "Preemption overhead (share of quantum time)",
            "percentunit",
            [
                (
                    "(sum(rate(quanta_suspend_seconds_sum[$__rate_interval]))"
                    " + sum(rate(quanta_resume_seconds_sum[$__rate_interval])))"
                    " / sum(rate(quanta_quantum_seconds_sum[$__rate_interval]))",
                    "suspend + resume",
                )
            ],
        ),
        (
            "Progress estimate error at completion (estimated fraction - time elapsed)",
            "percentunit",
            quantiles("quanta_progress_estimate_error", (0.05, 0.5, 0.95)),
        ),
    ],
}


def panel(index: int, title: str, unit: str, targets: list[tuple[str, str]]) -> dict[str, object]:
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def dashboard(spec: Mapping[str, object]) -> dict[str, object]:
    panels = spec["panels"]
    assert isinstance(panels, list)
    return {
        "uid": spec["uid"],
        "title": spec["title"],
        "description": spec["description"],
        "tags": ["quanta"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"}]
        },
        "panels": [panel(i, *p) for i, p in enumerate(panels)],
    }


def files() -> dict[Path, str]:
    return {FOLDER / f"{d['uid']}.json": json.dumps(dashboard(d), indent=2) + "\n" for d in (SERVICE, PREEMPTION)}


if __name__ == "__main__":
    wanted = files()
    if "--check" in sys.argv:
        stale = [str(p) for p, text in wanted.items() if not p.exists() or p.read_text() != text]
        print("\n".join(f"out of date: {p}" for p in stale) or "dashboards up to date")
        sys.exit(1 if stale else 0)
    FOLDER.mkdir(parents=True, exist_ok=True)
    for path, text in wanted.items():
        path.write_text(text)
        print(f"wrote {path}")
