"""The alerts under promtool's unit tests (each fires on a bad series and stays quiet on a healthy
one), and the dashboards: generated files up to date, every panel's PromQL parsed by promtool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "charts" / "quanta" / "files" / "dashboards").glob("*.json"))
QUERY = 'route="/v1/datasets/{name}/query",method="POST"'

# alert -> (severity, series that make it fire, minutes after which it fires, series that keep it quiet);
# the queue's gauges as the gateway exports them, with their shard's label (one shard here)
CASES: dict[str, tuple[str, dict[str, str], int, dict[str, str]]] = {
    "QuantaQueueLagGrowing": (
        "warning",
        {'quanta_queue_lag{shard="0"}': "0+2x40"},
        30,
        {'quanta_queue_lag{shard="0"}': "50x40"},
    ),
    "QuantaNoLiveWorker": (
        "critical",
        {'quanta_workers{shard="0"}': "0x10", 'quanta_queue_depth{shard="0"}': "3x10"},
        5,
        {'quanta_workers{shard="0"}': "0x10", 'quanta_queue_depth{shard="0"}': "0x10"},  # scaled to zero, idle
    ),
    "QuantaPreemptionOverhead": (
        "warning",
        {
            "quanta_quantum_seconds_sum": "0+60x40",
            "quanta_suspend_seconds_sum": "0+5x40",
            "quanta_resume_seconds_sum": "0+3x40",
        },
        30,
        {
            "quanta_quantum_seconds_sum": "0+60x40",
            "quanta_suspend_seconds_sum": "0+1x40",
            "quanta_resume_seconds_sum": "0+1x40",
        },
    ),
    "QuantaReplyTimeouts": (
        "warning",
        {f'quanta_http_requests_total{{{QUERY},status="200"}}': "0+100x20", "quanta_reply_timeouts_total": "0+5x20"},
        15,
        {f'quanta_http_requests_total{{{QUERY},status="200"}}': "0+100x20", "quanta_reply_timeouts_total": "0x20"},
    ),
    "QuantaDeadLetters": (
        "warning",
        {"quanta_dead_letters_total": "0 0 0 1 1 1 1"},
        5,
        {"quanta_dead_letters_total": "0x10"},
    ),
    "QuantaHighErrorRate": (
        "critical",
        {
            f'quanta_http_requests_total{{{QUERY},status="200"}}': "0+90x20",
            f'quanta_http_requests_total{{{QUERY},status="503"}}': "0+10x20",
        },
        15,
        {
            f'quanta_http_requests_total{{{QUERY},status="200"}}': "0+90x20",
            f'quanta_http_requests_total{{{QUERY},status="503"}}': "0+1x20",
        },
    ),
    "QuantaRedisDown": ("critical", {'quanta_redis_up{shard="0"}': "0x10"}, 5, {'quanta_redis_up{shard="0"}': "1x10"}),
}
# the alerts on the queue's gauges fire per shard (each shard has its own Redis and workers)
PER_SHARD = {"QuantaQueueLagGrowing", "QuantaNoLiveWorker", "QuantaRedisDown"}


def g(metric: str, shard: int, gateway: int = 1) -> str:
    """A queue gauge as one of two gateways exports it for one shard."""
    return f'{metric}{{shard="{shard}",instance="gateway-{gateway}"}}'


# Two shards, two gateways: (alert, series, minutes, the shards it fires for). Each would go wrong
# with the alert taken over every shard at once.
SHARDED: dict[str, tuple[str, dict[str, str], int, list[str]]] = {
    "redis-down-in-one-shard": (
        "QuantaRedisDown",
        {g("quanta_redis_up", 0, 1): "1x10", g("quanta_redis_up", 0, 2): "1x10",
         g("quanta_redis_up", 1, 1): "0x10", g("quanta_redis_up", 1, 2): "0x10"},
        5,
        ["1"],
    ),
    "one-gateway-still-reaches-it": (
        "QuantaRedisDown",
        {g("quanta_redis_up", 0, 1): "1x10", g("quanta_redis_up", 0, 2): "1x10",
         g("quanta_redis_up", 1, 1): "0x10", g("quanta_redis_up", 1, 2): "1x10"},
        5,
        [],
    ),
    "no-worker-in-one-shard": (
        "QuantaNoLiveWorker",
        {g("quanta_workers", 0): "5x10", g("quanta_queue_depth", 0): "0x10",
         g("quanta_workers", 1): "0x10", g("quanta_queue_depth", 1): "3x10"},
        5,
        ["1"],
    ),
    "lag-growing-in-one-shard": (
        "QuantaQueueLagGrowing",
        {g("quanta_queue_lag", 0): "50x40", g("quanta_queue_lag", 1): "0+2x40"},
        30,
        ["1"],
    ),
    "high-lag-and-growth-in-different-shards": (
        "QuantaQueueLagGrowing",
        {g("quanta_queue_lag", 0): "50x40", g("quanta_queue_lag", 1): "0+0.5x40"},
        30,
        [],
    ),
}  # fmt: skip


@pytest.fixture
def rules(render, one, tmp_path: Path) -> tuple[Path, dict[str, dict[str, Any]]]:
    """The chart's PrometheusRule as a Prometheus rule file, and its alerts by name."""
    docs = render({"monitoring": {"prometheusRule": {"enabled": True}}})
    spec = one(docs, "PrometheusRule")["spec"]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path, {r["alert"]: r for group in spec["groups"] for r in group["rules"]}


def test_rules_pass_promtool_check(rules, promtool) -> None:
    done = promtool("check", "rules", str(rules[0]))
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_unit_test(rules) -> None:
    assert set(rules[1]) == set(CASES)


def fired(rule: dict[str, Any], shard: str | None) -> dict[str, Any]:
    """The alert promtool should see: its labels, and its annotations with the shard filled in."""
    labels = {"severity": rule["labels"]["severity"], **({"shard": shard} if shard is not None else {})}
    annotations = {k: v.replace("{{ $labels.shard }}", shard or "") for k, v in rule["annotations"].items()}
    return {"exp_labels": labels, "exp_annotations": annotations}


def promtool_case(alert: str, at: int, series: dict[str, str], alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in series.items()],
        "alert_rule_test": [{"eval_time": f"{at}m", "alertname": alert, "exp_alerts": alerts}],
    }


def run_promtool_tests(promtool, rules_path: Path, tests: list[dict[str, Any]], tmp_path: Path) -> None:
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(rules_path)], "evaluation_interval": "1m", "tests": tests}))
    done = promtool("test", "rules", str(test_file))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("alert", sorted(CASES))
def test_each_alert_fires_on_bad_series_and_stays_quiet_on_healthy_ones(
    rules, promtool, alert: str, tmp_path: Path
) -> None:
    path, by_name = rules
    severity, firing, at, quiet = CASES[alert]
    assert by_name[alert]["labels"]["severity"] == severity
    expected = [fired(by_name[alert], "0" if alert in PER_SHARD else None)]
    tests = [promtool_case(alert, at, firing, expected), promtool_case(alert, at, quiet, [])]
    run_promtool_tests(promtool, path, tests, tmp_path)


@pytest.mark.parametrize("case", sorted(SHARDED))
def test_the_queue_alerts_fire_for_the_shard_at_fault(rules, promtool, case: str, tmp_path: Path) -> None:
    """Each shard has its own Redis and workers: a shard whose Redis no gateway reaches, or with
    tasks and no worker, alerts on its own (the others are fine); a gateway that reaches it is enough."""
    path, by_name = rules
    alert, series, at, shards = SHARDED[case]
    expected = [fired(by_name[alert], shard) for shard in shards]
    run_promtool_tests(promtool, path, [promtool_case(alert, at, series, expected)], tmp_path)


def test_the_queue_alerts_name_their_shard(rules) -> None:
    for alert in PER_SHARD:
        assert "by (shard)" in rules[1][alert]["expr"], alert
        assert "{{ $labels.shard }}" in rules[1][alert]["annotations"]["summary"], alert


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard, panel title, expr) for every target of every panel."""
    out = []
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        out += [(board["uid"], p["title"], t["expr"]) for p in board["panels"] for t in p["targets"]]
    return out


def test_the_dashboards_are_what_the_generator_writes() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "k8s" / "dashboards.py"), "--check"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert [p.stem for p in DASHBOARDS] == ["quanta-preemption", "quanta-service"]


def test_every_panel_query_parses(promtool, tmp_path: Path) -> None:
    rules = [{"record": f"dashboard:q{i}", "expr": expr.replace("$__rate_interval", "5m")}
             for i, (_, _, expr) in enumerate(dashboard_queries())]  # fmt: skip
    assert len(rules) >= 20
    path = tmp_path / "dashboards.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout


def test_the_dashboards_configmaps_carry_grafana_label_and_the_json(render) -> None:
    assert not [d for d in render() if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]]
    docs = render({"monitoring": {"dashboards": {"enabled": True}}})
    maps = [d for d in docs if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]]
    assert len(maps) == len(DASHBOARDS)
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((name, text),) = cm["data"].items()
        assert json.loads(text) == json.loads((DASHBOARDS[0].parent / name).read_text())
