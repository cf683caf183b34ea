# The images, one target each, built from the repository root and installed from uv.lock:
#   docker build --target gateway|worker|loader|loadtest -t quanta-ROLE:TAG --build-arg BASE_IMAGE=... .
# gateway   FastAPI and the Redis clients, the query page (its assets built by npm in the `web`
#           stage), the engine and its native core (the regular expressions the smart client
#           evaluates, the first quanta it runs itself), the sample dataset with its side index
# worker    the engine and its native core, the sample dataset with its side index
# loader    `quanta load`, the native core and the Rust HDT writer quanta-rdf2hdt
# loadtest  Locust, the smart client (and the native core it reads terms with) and loadtest/
#           (locustfile, users, workload files), for the Jobs of loadtest/kubernetes
# BASE_IMAGE is the run-time base (its python3 is the interpreter of the venv); RUST_IMAGE provides
# a Rust toolchain (>= 1.85) at RUST_TOOLCHAIN_DIR; UV_IMAGE provides /uv; NODE_IMAGE (Node.js and
# npm) builds the query page's assets. Only the venv (and the role's data) reach an image; the test
# kit (quanta-testkit) and the `dev` group never do (lib/testkit/tests/test_production_imports.py).
# Docker's classic builder (DOCKER_BUILDKIT=0) builds every stage above the target, BuildKit only
# those it needs: so the shared stages come first, and the gateway's and the load test's last.
ARG BASE_IMAGE=python:3.11-slim-bookworm
ARG RUST_IMAGE=rust:1.95-bookworm
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${UV_IMAGE} AS uv
FROM ${RUST_IMAGE} AS rust

# Every workspace member's pyproject.toml and the lock, nothing else: the layer that installs the
# third-party dependencies of a role is rebuilt only when one of these changes.
FROM ${BASE_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN find . -type f ! -name pyproject.toml ! -name uv.lock -delete

# What every image runs as: the venv of its build stage, non-root (the chart also mounts the root
# filesystem read-only, with /tmp an emptyDir).
FROM ${BASE_IMAGE} AS runtime
ENV PATH=/app/.venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001

# uv, installing into /app/.venv from the lock.
FROM ${BASE_IMAGE} AS uv-env
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_NATIVE_TLS=1 UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src

# The compilers: a C toolchain for the linker (and any native dependency without a wheel) and Rust.
FROM uv-env AS toolchain
ARG RUST_TOOLCHAIN_DIR=/usr/local/rustup/toolchains/1.95.0-x86_64-unknown-linux-gnu
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=rust ${RUST_TOOLCHAIN_DIR} /usr/local/rust
ENV PATH=/usr/local/rust/bin:$PATH CARGO_HOME=/tmp/cargo

# The native core's wheel, in a stage of its own: compiled once for all the images, and again
# only when its sources change (not the layers below).
FROM toolchain AS native
COPY lib/native lib/native
RUN uv build --quiet --wheel --out-dir /wheels lib/native

# Each role's build: 1. its third-party dependencies from the lock, in a layer of their own;
# 2. the project's own packages, not editable (the sources stay in the build stage), and the
# native core's wheel.
FROM toolchain AS worker-build
COPY --from=manifests /src ./
RUN uv sync --locked --no-default-groups --no-install-workspace --package quanta-worker
COPY . .
COPY --from=native /wheels /wheels
RUN uv sync --locked --no-default-groups --no-editable --no-install-package quanta-native --package quanta-worker \
    && uv pip install --quiet --python /app/.venv/bin/python --no-deps /wheels/*.whl
# 3. The sample dataset and its side index (built on first open), for the worker's and the
# gateway's images: the default catalog serves without a volume, and the read-only pods never
# write one (the gateway opens only files already indexed, for the first quanta it runs).
COPY data/watdiv-100k.hdt /opt/quanta/data/
RUN /app/.venv/bin/python -c \
    "from quanta.engine.storage import open_store; open_store('/opt/quanta/data/watdiv-100k.hdt')" >/dev/null

FROM runtime AS worker
COPY --from=worker-build /app/.venv /app/.venv
COPY --from=worker-build /opt/quanta/data /opt/quanta/data
EXPOSE 9100
ENTRYPOINT ["/app/.venv/bin/python", "-m", "quanta.worker.cli"]

FROM toolchain AS loader-build
COPY --from=manifests /src ./
RUN uv sync --locked --no-default-groups --no-install-workspace --package quanta-loader
# The HDT writer (its own Cargo.lock), into the venv's bin
COPY services/loader/Cargo.toml services/loader/Cargo.lock services/loader/
COPY services/loader/src services/loader/src
RUN cargo install --locked --path services/loader --root /app/.venv --target-dir /tmp/target \
    && rm -f /app/.venv/.crates.toml /app/.venv/.crates2.json
COPY . .
COPY --from=native /wheels /wheels
RUN uv sync --locked --no-default-groups --no-editable --no-install-package quanta-native --package quanta-loader \
    && uv pip install --quiet --python /app/.venv/bin/python --no-deps /wheels/*.whl

FROM runtime AS loader
COPY --from=loader-build /app/.venv /app/.venv
ENTRYPOINT ["/app/.venv/bin/python", "-m", "quanta.loader.cli"]

# The query page's third-party code (YASGUI), from npm as its package-lock.json pins it.
FROM ${NODE_IMAGE} AS web
WORKDIR /web
COPY services/gateway/web/package.json services/gateway/web/package-lock.json services/gateway/web/build.sh ./
RUN ./build.sh /web/vendor

FROM toolchain AS gateway-build
COPY --from=manifests /src ./
RUN uv sync --locked --no-default-groups --no-install-workspace --package quanta-gateway
COPY . .
COPY --from=web /web/vendor services/gateway/src/quanta/gateway/static/vendor
COPY --from=native /wheels /wheels
RUN uv sync --locked --no-default-groups --no-editable --no-install-package quanta-native --package quanta-gateway \
    && uv pip install --quiet --python /app/.venv/bin/python --no-deps /wheels/*.whl

FROM runtime AS gateway
COPY --from=gateway-build /app/.venv /app/.venv
COPY --from=worker-build /opt/quanta/data /opt/quanta/data
EXPOSE 8000
ENTRYPOINT ["/app/.venv/bin/python", "-m", "quanta.gateway.cli"]
CMD ["--host", "0.0.0.0", "--port", "8000"]

# quanta-loadtest is a virtual member: syncing it installs what it declares (Locust, the client).
FROM toolchain AS loadtest-build
COPY --from=manifests /src ./
RUN uv sync --locked --no-default-groups --no-install-workspace --package quanta-loadtest
COPY . .
COPY --from=native /wheels /wheels
RUN uv sync --locked --no-default-groups --no-editable --no-install-package quanta-native --package quanta-loadtest \
    && uv pip install --quiet --python /app/.venv/bin/python --no-deps /wheels/*.whl

# The WatDiv folder is not in the image: point QUANTA_LOADTEST_WORKLOAD at one of the workload
# files under /app/loadtest/workloads (their expected counts are for the dataset they name).
FROM runtime AS loadtest
COPY --from=loadtest-build /app/.venv /app/.venv
COPY loadtest/*.py /app/loadtest/
COPY loadtest/workloads /app/loadtest/workloads
ENV HOME=/tmp
# 8089: the web UI (master); 5557: workers to master
EXPOSE 8089 5557
ENTRYPOINT ["/app/.venv/bin/locust", "-f", "/app/loadtest/locustfile.py"]
