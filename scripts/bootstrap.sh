#!/usr/bin/env bash
# Install everything quanta needs, idempotently: Debian packages, the project's Python
# environment (.venv) exactly as uv.lock pins it, and the project's Rust HDT writer.
# Run by `make install` (and so by `make run` and `make test`). Everything it builds stays in the
# clone; outside it are only uv itself (scripts/uv.sh: a pinned binary from PyPI) and the
# download caches of uv and cargo.
#
#   QUANTA_FRESH=1    no uv cache: every wheel downloaded, every sdist built again (CI)
#   --bare-converter  also the `hdt` crate's own converter (the loader benchmark's baseline)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
HDT_CRATE_VERSION=0.7.3
VENV=${VENV:-.venv}

log() { printf '\033[1mbootstrap:\033[0m %s\n' "$*" >&2; }

# -- Debian packages ----------------------------------------------------------
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v g++ >/dev/null || need+=(g++)          # pyHDT is C++
command -v make >/dev/null || need+=(make)
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# -- Python: exactly what uv.lock pins --------------------------------------------
if ! "$VENV/bin/python" -c 'import hdt' 2>/dev/null; then
  # pyHDT builds in the environment (see pyproject.toml): its build tools first
  log "building the Python environment ($VENV; pyHDT compiles for about 3 minutes, once)"
  scripts/uv.sh sync --locked --inexact --only-group build --quiet
fi
scripts/uv.sh sync --locked --all-packages --quiet

# -- the project's HDT writer (the crate in services/loader): `quanta load` and the tests ---
export PATH="$HOME/.cargo/bin:$PATH"
rust_digest=$(cat services/loader/Cargo.toml services/loader/Cargo.lock $(find services/loader/src -name '*.rs' | sort) \
  | sha256sum | cut -c1-16)
rust_stamp="$VENV/.quanta-rdf2hdt-$rust_digest"
if [ ! -x "$VENV/bin/quanta-rdf2hdt" ] || [ ! -f "$rust_stamp" ]; then
  command -v cargo >/dev/null || { log "cargo (Rust >= 1.85) is required to build the HDT writer"; exit 1; }
  log "building the HDT writer quanta-rdf2hdt (about 2 minutes, once per version)"
  cargo install --quiet --locked --force --path services/loader --root "$VENV" --target-dir "${CARGO_TARGET_DIR:-.build/cargo}"
  rm -f "$VENV"/.quanta-rdf2hdt-* "$VENV/.crates.toml" "$VENV/.crates2.json"
  touch "$rust_stamp"
fi
if [ "${1:-}" = --bare-converter ] && ! "$VENV/bin/hdt" --version 2>/dev/null | grep -q "$HDT_CRATE_VERSION"; then
  log "building the bare HDT converter (hdt $HDT_CRATE_VERSION, about 2 minutes, once)"
  cargo install --quiet --locked --force hdt --version "$HDT_CRATE_VERSION" --features cli --root "$VENV" \
    --target-dir "${CARGO_TARGET_DIR:-.build/cargo}"
fi

# -- the query page's web assets (issue 12): YASGUI from npm as services/gateway/web/package-lock.json
# pins it, into the folder the gateway serves; built only when missing or the lockfile changed -------
services/gateway/web/build.sh

# -- the bundled sample: the storage backend's side index, so workers start at once ---------
"$VENV/bin/python" - data/watdiv-100k.hdt >/dev/null 2>&1 <<'EOF'
import os, sys
from quanta.engine.storage import open_store, side_index_path
if not os.path.exists(side_index_path(sys.argv[1])):
    open_store(sys.argv[1])  # builds it
EOF
log "ready ($VENV)"
