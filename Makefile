# Thin wrappers; scripts/bootstrap.sh installs what is missing (idempotent).
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: install run test test-fast test-chart dev lint format lock proto bench bench-engine bench-loader bench-service bench-native bench-client bench-shipping bench-bsbm bench-redis bench-sparql clean

install:
	@scripts/bootstrap.sh

## The service on this machine (Redis, gateway, 2 workers) over the bundled sample dataset.
run: install
	$(BIN)/quanta up

## The whole test suite (what CI runs): the Python suite (its query page tests drive Debian's Chromium,
## which scripts/browser.sh installs when missing), then the chart's tiers (static checks,
## rules and dashboards, a real API server, real pods, KEDA), whose tools build once, cached by version.
test: install
	scripts/browser.sh
	cd lib/native && cargo test --quiet --locked --release --no-default-features
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not chart and not cluster"
	PYTHON=$(BIN)/python scripts/k8s/test.sh all

## The Python suite without the slow tests and without Kubernetes.
test-fast: install
	scripts/browser.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow and not chart and not cluster"

## The chart's tiers alone (scripts/k8s/test.sh: static rules apiserver pods keda hpa, or all).
test-chart: install
	PYTHON=$(BIN)/python scripts/k8s/test.sh $(or $(TIERS),all)

## The Kubernetes dev loop (needs a cluster and skaffold).
dev:
	skaffold dev -p local

## ruff (lint and format), mypy over every Python file (strict; tests: every body checked), and
## rustfmt and clippy on both Rust crates (the native core, the loader's HDT writer). bench/ is
## checked apart: it and loadtest/ both hold a top-level module named `service`.
lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(BIN)/mypy && $(BIN)/mypy bench
	cd lib/native && cargo fmt --check && cargo clippy --quiet --locked --release --all-targets \
	  --no-default-features -- -D warnings
	cargo fmt --manifest-path services/loader/Cargo.toml --check
	cargo clippy --quiet --manifest-path services/loader/Cargo.toml --locked --release --all-targets -- -D warnings

## Re-resolve uv.lock after editing a pyproject.toml (docs/development.md).
lock:
	scripts/uv.sh lock

format: install
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

## Regenerate the protobuf code: rebuild the proto package, whose build hook runs protoc
## (`make install` does it too whenever a .proto changes).
proto: install
	scripts/uv.sh sync --locked --all-packages --quiet --reinstall-package quanta-proto

bench: bench-engine bench-loader bench-service bench-native bench-client

bench-engine: install
	$(BIN)/python bench/engine.py

bench-loader: install
	@scripts/bootstrap.sh --bare-converter
	$(BIN)/python bench/loader.py

bench-service: install
	$(BIN)/python bench/service.py

bench-native: install
	$(BIN)/python bench/native.py

bench-client: install
	$(BIN)/python bench/client.py

bench-shipping: install
	$(BIN)/python bench/shipping.py

## The Berlin SPARQL Benchmark's own driver against quanta, Fuseki, Oxigraph and Virtuoso (bench/README.md;
## Java, Maven and, for Virtuoso, root's apt-get). BSBM_FLAGS: e.g. --products 1k,10k --clients 1,4,8,64.
bench-bsbm: install
	$(BIN)/python bench/bsbm.py $(BSBM_FLAGS)

## What one quantum and one MB of results cost Redis, and how many workers one Redis keeps busy (issue 20;
## bench/README.md), on BSBM's data. REDIS_FLAGS: e.g. --products 284k (the docs' figures: 98.6 M triples).
bench-redis: install
	$(BIN)/python bench/redis_capacity.py $(REDIS_FLAGS)

## 56 full-SPARQL queries on watdiv-1m, one client, quanta against Fuseki, Oxigraph and Virtuoso (issue 19;
## bench/README.md). SPARQL_FLAGS: e.g. --dataset 100k --rounds 1 --engines quanta,oxigraph.
bench-sparql: install
	$(BIN)/python bench/sparql.py $(SPARQL_FLAGS)

clean:
	rm -rf $(VENV) .build .pytest_cache .ruff_cache .mypy_cache

## ---- Load tests (loadtest/README.md; owner: the load-testing work, issue 11) ----------------------
## Each experiment runs real services on this machine (quanta; Apache Jena Fuseki through scripts/jena.sh,
## Virtuoso through scripts/bsbm.sh) and writes loadtest/results/NAME.json; loadtest-report renders docs/benchmarks.md.
LOADTEST := $(BIN)/python loadtest/experiments.py
.PHONY: loadtest loadtest-smoke loadtest-wct loadtest-icwe loadtest-qmph loadtest-requests loadtest-quantum \
	loadtest-faults loadtest-report

## Everything, about an hour on 2 cores, then the report.
loadtest: loadtest-quantum loadtest-requests loadtest-wct loadtest-icwe loadtest-qmph loadtest-faults loadtest-report

## The bounded Locust runs of the test suite (about 20 s).
loadtest-smoke: install
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/loadtest

loadtest-wct: install
	$(LOADTEST) wct
loadtest-icwe: install
	$(LOADTEST) icwe --clients 1,4,16,32
loadtest-qmph: install
	$(LOADTEST) qmph --workers 2
loadtest-requests: install
	$(LOADTEST) requests
loadtest-quantum: install
	$(LOADTEST) quantum
loadtest-faults: install
	$(BIN)/python loadtest/faults.py
loadtest-report: install
	$(BIN)/python loadtest/report.py
