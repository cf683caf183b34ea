"""Draw each Grafana dashboard of the chart with matplotlib from a real Prometheus (no Grafana runs
here): every panel's queries over a time range, one picture per dashboard.

    python scripts/k8s/render_dashboards.py --prometheus http://127.0.0.1:9090 --start T0 --end T1 --out docs/img

tests/chart/test_metrics_live.py runs it against a Prometheus that scraped the real service
(QUANTA_RENDER_DOCS=1 writes the pictures of docs/ there).
"""

from __future__ import annotations

import argparse
import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FOLDER = Path(__file__).resolve().parents[2] / "charts" / "quanta" / "files" / "dashboards"


def query_range(prometheus: str, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{params}", timeout=30) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def legend(template: str, labels: dict[str, str]) -> str:
    for key, value in labels.items():
        template = template.replace("{{" + key + "}}", value)
    return template


def render(board: dict[str, Any], prometheus: str, start: float, end: float, out: Path, rate: str = "30s") -> Path:
    panels: list[dict[str, Any]] = board["panels"]
    rows = (len(panels) + 1) // 2
    fig, axes = plt.subplots(rows, 2, figsize=(13, 3.1 * rows), squeeze=False)
    step = max(1.0, (end - start) / 200)
    for ax, p in zip(axes.flat, panels, strict=False):
        for target in p["targets"]:
            expr = target["expr"].replace("$__rate_interval", rate)
            for series in query_range(prometheus, expr, start, end, step):
                times = [float(t) - start for t, _ in series["values"]]
                values = [float(v) for _, v in series["values"]]
                ax.plot(times, values, label=legend(target["legendFormat"], series["metric"]))
        ax.set_title(p["title"], fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.set_ylabel(p["fieldConfig"]["defaults"]["unit"], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7, loc="upper left")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(f"{board['title']} (rendered from Prometheus; Grafana shows the same queries)", fontsize=12)
    fig.tight_layout()
    path = out / f"dashboard-{board['uid']}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--start", type=float, required=True)
    parser.add_argument("--end", type=float, required=True)
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    args = parser.parse_args()
    for path in sorted(FOLDER.glob("*.json")):
        print(render(json.loads(path.read_text()), args.prometheus, args.start, args.end, args.out))


if __name__ == "__main__":
    main()
