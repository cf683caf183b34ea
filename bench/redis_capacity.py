"""One Redis, how far (issue 20, part 4): what one quantum and one MB of results cost Redis, and the
number of workers at which one Redis is saturated.

    python bench/redis_capacity.py [--products 10k] [--clients 8] [--mixes 200] [--workers 2] [--gateways 2]
                                   [--shards 1,2,3]

`quanta up` on BSBM's dataset at `--products` (bench/bsbm.py's HDT file, loaded by it when missing:
`python bench/bsbm.py --products 284k ...` makes the 100 M-triple one) against Redis servers started
here (`--shards`: the queue sharded over that many, each count in turn), then two workloads through
`/sparql`, each after `CONFIG RESETSTAT`:

1. **explore**: BSBM's explore mix by its own test driver, `--clients` at once: many short queries,
   about one quantum each (the 100 M-triple workload of issue 20);
2. **long**: bench/bsbm.py's PREEMPTED queries read to their end, two at a time: pages of up to
   1 MiB of results each, the most bytes a quantum sends through Redis.

After each: Redis's own figures (`INFO commandstats`, `cpu`, `stats`) and the CPU seconds of the
service's processes by role (from /proc). A quantum is a task, one `XADD` into the stream. Redis runs
commands on one thread, so it is saturated when its main thread is busy all the time: with N workers
each busy all the time, N * (quanta per worker CPU second) * (Redis CPU per quantum) = 1 second per
second, so N = (the workers' CPU seconds) / (Redis's main-thread CPU seconds) for the same work.
With K shards, the busiest shard's thread is the one that saturates first.

Writes bench/results/redis_capacity.json and the `redis` block of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import benchlib  # bench/, the script's own folder
import bsbm  # bench/: BSBM's generator, driver and long queries
import redis
from peers import start_quanta

from quanta.common.redis_server import redis_server

REPO = benchlib.REPO
RESULTS = REPO / "bench" / "results" / "redis_capacity.json"
DOC = REPO / "docs" / "benchmarks.md"
# Redis's main thread must not be busier than this for its queue waits to stay short
BUSY = 0.8
# how the service runs: as `quanta up` and the chart deploy it (a query's first quantum, up to 10 ms,
# in the gateway: short queries never reach Redis), and with every quantum through the queue
CONFIGS: dict[str, dict[str, str]] = {"deployed": {}, "queued": {"QUANTA_LOCAL_QUANTUM_MS": "0"}}


def redis_figures(client: redis.Redis) -> dict[str, Any]:
    """Redis's counters since the last CONFIG RESETSTAT (CPU since it started)."""
    stats, cpu = client.info("stats"), client.info("cpu")
    commands = {
        name.removeprefix("cmdstat_"): {"calls": v["calls"], "usec": v["usec"]}
        for name, v in client.info("commandstats").items()
    }
    return {
        "cpu_s": cpu["used_cpu_user_main_thread"] + cpu["used_cpu_sys_main_thread"],
        "bytes_in": stats["total_net_input_bytes"],
        "bytes_out": stats["total_net_output_bytes"],
        "commands": commands,
    }


def read_whole(url: str, query: str) -> int:
    """A query's whole answer through /sparql (SPARQL JSON): its bytes."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.netloc, timeout=3600)
    connection.request(
        "GET", f"{address.path}?query={quote(query)}", headers={"Accept": "application/sparql-results+json"}
    )
    response = connection.getresponse()
    size = 0
    while chunk := response.read(1 << 20):
        size += len(chunk)
    if response.status != 200:
        raise RuntimeError(f"{response.status} for {query[:80]}")
    connection.close()
    return size


def measured(clients: list[redis.Redis], pid: int, work: Any) -> dict[str, Any]:
    """Run `work()`; what it cost the Redis servers (the queue's shards, summed) and the service's roles."""
    for client in clients:
        client.config_resetstat()
    cpu_before, roles_before = [redis_figures(c)["cpu_s"] for c in clients], benchlib.role_cpu_s(pid)
    started = time.perf_counter()
    extra = work()
    seconds = time.perf_counter() - started
    shards, roles_after = [redis_figures(c) for c in clients], benchlib.role_cpu_s(pid)
    shard_cpu = [after["cpu_s"] - before for after, before in zip(shards, cpu_before, strict=True)]
    figures = summed(shards)
    quanta = figures["commands"].get("xadd", {}).get("calls", 0)
    redis_cpu, busiest = sum(shard_cpu), max(shard_cpu)
    roles = {role: round(roles_after[role] - roles_before.get(role, 0.0), 2) for role in roles_after}
    per = max(1, quanta)
    top = sorted(figures["commands"].items(), key=lambda item: -item[1]["usec"])
    return {
        **extra,
        "seconds": round(seconds, 2),
        "quanta": quanta,
        "redis_cpu_s": round(redis_cpu, 3),
        "redis_busy": round(redis_cpu / seconds, 3),
        # each shard's share of the quanta and of the Redis CPU
        "shard_quanta": [s["commands"].get("xadd", {}).get("calls", 0) for s in shards],
        "shard_cpu_s": [round(cpu, 3) for cpu in shard_cpu],
        "redis_cpu_us_per_quantum": round(redis_cpu / per * 1e6, 1),
        "commands_per_quantum": round(sum(c["calls"] for c in figures["commands"].values()) / per, 2),
        "bytes_in_per_quantum": round(figures["bytes_in"] / per),
        "bytes_out_per_quantum": round(figures["bytes_out"] / per),
        "bytes_in": figures["bytes_in"],
        "bytes_out": figures["bytes_out"],
        "commands": {name: {**c, "per_quantum": round(c["calls"] / per, 2)} for name, c in top[:12]},
        "cpu_s_by_role": roles,
        # the busiest shard's main thread at BUSY keeps this many workers busy all the time
        "workers_at_saturation": round(BUSY * roles.get("worker", 0.0) / busiest) if busiest else None,
        "gateways_at_saturation": round(BUSY * roles.get("gateway", 0.0) / busiest) if busiest else None,
    }


def summed(shards: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of several Redis servers, added up."""
    commands: dict[str, dict[str, int]] = {}
    for shard in shards:
        for name, c in shard["commands"].items():
            total = commands.setdefault(name, {"calls": 0, "usec": 0})
            total["calls"] += c["calls"]
            total["usec"] += c["usec"]
    keys = ("cpu_s", "bytes_in", "bytes_out")
    return {**{k: sum(s[k] for s in shards) for k in keys}, "commands": commands}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--products", type=bsbm.products_list, default=[10000], help="BSBM scale (default 10k; the docs: 284k)"
    )
    parser.add_argument("--clients", type=int, default=8, help="the driver's clients (-mt)")
    parser.add_argument("--mixes", type=int, default=200, help="explore mixes")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gateways", type=int, default=2)
    parser.add_argument(
        "--shards", type=lambda s: [int(k) for k in s.split(",")], default=[1, 2],
        help="Redis servers to shard the queue over, each count in turn (default 1,2)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="where the JSON goes (default bench/results/redis_capacity.json)")
    parser.add_argument("--render", type=Path, help="only rewrite the docs from a saved result")
    args = parser.parse_args()
    if max(args.shards) > args.workers:
        parser.error("every shard needs a worker of its own: --workers at least the largest --shards")
    if args.render:
        benchlib.replace_block(DOC, "redis", render(json.loads(args.render.read_text())))
        return
    products = args.products[0]
    driver = bsbm.Driver.fetch()
    generated = driver.generate(products)
    data = Path(generated["dir"])
    out = bsbm.WORK / f"run-pc{products}"
    hdt = out / "bsbm.hdt"
    result: dict[str, Any] = {
        "command": "python bench/redis_capacity.py " + " ".join(sys.argv[1:]),
        "machine": benchlib.machine({"redis": "redis"}, {"redis_server": ["redis-server", "--version"]}),
        "products": products,
        "triples": generated["triples"],
        "settings": {
            "workers": args.workers,
            "gateways": args.gateways,
            "clients": args.clients,
            "mixes": args.mixes,
            "shards": args.shards,
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    source = hdt if hdt.exists() else data / bsbm.DUMP
    for shards in args.shards:
        in_page_cache(out)  # each run starts warm, the first as the others (the store is GBs)
        for name, env in CONFIGS.items():
            result.setdefault("runs", {}).setdefault(str(shards), {})[name] = run_config(
                args, driver, data, out, source, shards, name, env
            )
    out_file = args.out or RESULTS
    out_file.write_text(json.dumps(result, indent=1) + "\n")
    print(f"results: {out_file}")
    if args.out is None:
        benchlib.replace_block(DOC, "redis", render(result))


def in_page_cache(folder: Path) -> None:
    """Read the store's files (HDT and side index) through, into the page cache."""
    for path in folder.glob("bsbm.hdt*"):
        with path.open("rb") as f:
            while f.read(1 << 24):
                pass


def run_config(
    args: argparse.Namespace, driver: bsbm.Driver, data: Path, out: Path, source: Path, shards: int, name: str,
    env: dict[str, str],
) -> dict[str, Any]:  # fmt: skip
    """Both workloads on `quanta up` over `shards` Redis servers, configured by `env`."""
    with ExitStack() as stack:
        servers = [stack.enter_context(redis_server()) for _ in range(shards)]
        quanta = start_quanta(
            stack, source, out, workers=args.workers, gateways=args.gateways,
            redis_url=",".join(s.url for s in servers), env=env,
        )  # fmt: skip
        clients = [redis.Redis.from_url(s.url, decode_responses=True) for s in servers]
        bsbm.log(f"{name}: quanta up on {args.products[0]:,} products, {shards} shard(s), {env or 'as deployed'}")

        def explore() -> dict[str, Any]:
            xml = out / "redis-explore.xml"
            run = driver.run(quanta.url, data, "explore", args.clients, args.mixes, 10, 60, xml)
            return {"qmph": run.get("qmph"), "errors": run.get("errors", run.get("error"))}

        def long() -> dict[str, Any]:
            with ThreadPoolExecutor(2) as pool:
                sizes = list(pool.map(lambda q: read_whole(quanta.url, q), bsbm.PREEMPTED))
            return {"result_bytes": sum(sizes)}

        runs = {"explore": measured(clients, quanta.pid, explore)}
        bsbm.log(f"{name}, explore: {runs['explore']}")
        if name == "deployed":
            runs["long"] = long_run = measured(clients, quanta.pid, long)
            mb = long_run["result_bytes"] / 2**20
            long_run["redis_cpu_ms_per_result_mb"] = round(long_run["redis_cpu_s"] / mb * 1000, 2)
            long_run["redis_bytes_per_result_byte"] = round(
                (long_run["bytes_in"] + long_run["bytes_out"]) / long_run["result_bytes"], 2
            )
            long_run["result_mb_per_s_at_saturation"] = round(BUSY * mb / max(long_run["shard_cpu_s"]))
            bsbm.log(f"{name}, long: {long_run}")
        return runs


def render(r: dict[str, Any]) -> str:
    m, by_shards = r["machine"], r["runs"]
    runs = by_shards[min(by_shards, key=int)]
    columns = [
        (f"explore mix, {r['settings']['clients']} clients, as deployed", runs["deployed"]["explore"]),
        ("explore mix, every quantum queued", runs["queued"]["explore"]),
        ("long queries, as deployed", runs["deployed"]["long"]),
    ]

    def row(name: str, cell: Any) -> str:
        return f"| {name} | " + " | ".join(str(cell(c)) for _, c in columns) + " |"

    def commands(run: dict[str, Any]) -> str:
        return ", ".join(f"{name} {c['per_quantum']:g} ({c['usec'] / max(1, run['quanta']):.1f} µs)"
                         for name, c in list(run["commands"].items())[:6])  # fmt: skip

    roles = ("worker", "gateway")
    redis_version = m["redis_server"].split("v=", 1)[-1].split()[0]
    lg = runs["deployed"]["long"]
    lines = [
        f"`{r['command'].strip()}` ({m['date']}, {m['nproc']} cores, Redis {redis_version}): "
        f"`quanta up` ({r['settings']['workers']} workers, {r['settings']['gateways']} gateway processes) on "
        f"BSBM at {r['products']:,} products ({r['triples']:,} triples), a Redis of its own; the explore mix "
        f"{r['settings']['mixes']} times by BSBM's driver; the long queries are bench/bsbm.py's PREEMPTED, "
        f"read to their end two at a time ({lg['result_bytes'] / 2**20:,.0f} MB of SPARQL JSON).",
        "",
        "| | " + " | ".join(name for name, _ in columns) + " |",
        "|---|" + "---|" * len(columns),
        row("QMpH", lambda c: f"{c['qmph']:,.0f}" if c.get("qmph") else ""),
        row("quanta through Redis (tasks)", lambda c: f"{c['quanta']:,}"),
        row("seconds", lambda c: c["seconds"]),
        row("Redis main thread: CPU s (busy)", lambda c: f"{c['redis_cpu_s']} ({c['redis_busy']:.0%})"),
        row("Redis CPU per quantum, µs", lambda c: c["redis_cpu_us_per_quantum"]),
        row("commands per quantum", lambda c: c["commands_per_quantum"]),
        row(
            "bytes into / out of Redis per quantum",
            lambda c: f"{c['bytes_in_per_quantum']:,} / {c['bytes_out_per_quantum']:,}",
        ),
        row("CPU s: workers / gateways", lambda c: " / ".join(str(c["cpu_s_by_role"].get(k, 0)) for k in roles)),
        row(f"workers one Redis keeps busy (its thread {BUSY:.0%} busy)", lambda c: c["workers_at_saturation"]),
        row("gateway processes one Redis keeps busy", lambda c: c["gateways_at_saturation"]),
        "",
        f"Per MB of results (long queries): {lg['redis_cpu_ms_per_result_mb']} ms of Redis CPU and "
        f"{lg['redis_bytes_per_result_byte']} bytes through Redis per byte of SPARQL JSON: one Redis "
        f"{BUSY:.0%} busy carries about {lg['result_mb_per_s_at_saturation']:,} MB of results per second.",
        "",
        "Commands per quantum (Redis's time in each, per quantum): "
        + "; ".join(f"{name}: {commands(c)}" for name, c in columns)
        + ".",
    ]
    if len(by_shards) > 1:
        lines += ["", *render_shards(by_shards)]
    return "\n".join(lines) + "\n"


def render_shards(by_shards: dict[str, dict[str, Any]]) -> list[str]:
    """The same workloads with the queue sharded: how the quanta split, and the busiest shard."""
    counts = sorted(by_shards, key=int)

    def row(name: str, cell: Any) -> str:
        return f"| {name} | " + " | ".join(str(cell(by_shards[k])) for k in counts) + " |"

    def split(run: dict[str, Any]) -> str:
        return " / ".join(f"{q:,}" for q in run["shard_quanta"])

    return [
        "With the queue sharded (`--shards`), the same runs:",
        "",
        "| Redis shards | " + " | ".join(counts) + " |",
        "|---|" + "---|" * len(counts),
        row("explore, every quantum queued: quanta per shard", lambda r: split(r["queued"]["explore"])),
        row("Redis CPU per quantum, µs (all shards)", lambda r: r["queued"]["explore"]["redis_cpu_us_per_quantum"]),
        row("busiest shard's thread: CPU s", lambda r: max(r["queued"]["explore"]["shard_cpu_s"])),
        row(
            f"workers the shards keep busy (the busiest {BUSY:.0%} busy): every quantum queued",
            lambda r: r["queued"]["explore"]["workers_at_saturation"],
        ),
        row("the same, as deployed", lambda r: r["deployed"]["explore"]["workers_at_saturation"]),
        row("MB of results per second (1 MiB pages)", lambda r: r["deployed"]["long"]["result_mb_per_s_at_saturation"]),
        row("explore QMpH, every quantum queued", lambda r: f"{r['queued']['explore']['qmph']:,.0f}"),
    ]


if __name__ == "__main__":
    main()
