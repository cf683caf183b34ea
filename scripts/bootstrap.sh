#!/usr/bin/env bash
# Install everything quanta needs, idempotently: Debian packages, the Rust HDT
# converter, and a virtualenv (.venv) with pyHDT and the project's packages.
# Run by `make install` (and so by `make run` and `make test`).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=${VENV:-.venv}
HDT_CRATE_VERSION=0.7.3

log() { printf '\033[1mbootstrap:\033[0m %s\n' "$*" >&2; }

# -- Debian packages ----------------------------------------------------------
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  log "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# -- the bare HDT converter (the `hdt` crate's CLI): the loader benchmark's baseline --
export PATH="$HOME/.cargo/bin:$PATH"
if ! hdt --version 2>/dev/null | grep -q "$HDT_CRATE_VERSION"; then
  command -v cargo >/dev/null || { log "cargo is required to build the HDT converter (Rust >= 1.85)"; exit 1; }
  log "building the HDT converter (hdt $HDT_CRATE_VERSION, about 2 minutes, once)"
  cargo install --quiet hdt --version "$HDT_CRATE_VERSION" --features cli --locked
fi

# -- the project's HDT writer (services/loader/rust): `quanta load` and the tests --
rust_digest=$(find services/loader/rust -type f \( -name '*.rs' -o -name Cargo.toml -o -name Cargo.lock \) | sort \
  | xargs cat | sha256sum | cut -c1-16)
rust_stamp="$HOME/.cargo/.quanta-rdf2hdt-$rust_digest"
if ! command -v quanta-rdf2hdt >/dev/null || [ ! -f "$rust_stamp" ]; then
  log "building the HDT writer quanta-rdf2hdt (about 2 minutes, once per version)"
  cargo install --quiet --locked --force --path services/loader/rust --target-dir "$HOME/.cache/quanta-rdf2hdt-build"
  rm -f "$HOME"/.cargo/.quanta-rdf2hdt-*
  touch "$rust_stamp"
fi

# -- Python ---------------------------------------------------------------------
[ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
if ! "$VENV/bin/python" -c 'import hdt' 2>/dev/null; then
  # pyHDT 2.3 has no wheel and needs pybind11 2.2 at build time (about 4 minutes, once per machine:
  # pip caches the wheel it builds)
  log "installing pyHDT"
  "${PIP[@]}" install "setuptools<76" wheel "pybind11==2.2.4"
  "${PIP[@]}" install --no-build-isolation "hdt==2.3"
fi
stamp="$VENV/.quanta-installed"
sources=$(find proto services -name pyproject.toml -o -name '*.proto' -o -name hatch_build.py | sort)
digest=$(cat $sources | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
  log "installing the quanta packages (editable)"
  # pip resolves local packages only if they come before their dependents
  editable=(-e proto)
  for pkg in services/engine $(ls -d services/*/ | sed 's#/$##' | grep -v '^services/engine$'); do
    [ -f "$pkg/pyproject.toml" ] || continue
    if grep -q '^test = ' "$pkg/pyproject.toml"; then editable+=(-e "$pkg[test]"); else editable+=(-e "$pkg"); fi
  done
  "${PIP[@]}" install -r requirements-dev.txt "${editable[@]}"
  echo "$digest" > "$stamp"
fi
log "ready ($VENV)"
