#!/usr/bin/env bash
# The project's uv (pinned; installed from PyPI on first use), with the project's settings:
#   scripts/uv.sh lock                       re-resolve uv.lock after editing a pyproject.toml
#   scripts/uv.sh lock --upgrade-package X   move X to its newest allowed version
# QUANTA_FRESH=1: no package cache (every wheel downloaded, every sdist built again).
# VENV: the environment (default .venv); QUANTA_UV_HOME: where uv itself is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9  # also `required-version` in pyproject.toml
PYTHON=${PYTHON:-python3.11}
UV_HOME=${QUANTA_UV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/quanta/uv-$UV_VERSION}

if ! "$UV_HOME/bin/uv" --version 2>/dev/null | grep -q "^uv $UV_VERSION"; then
  printf '\033[1mbootstrap:\033[0m %s\n' "installing uv $UV_VERSION" >&2
  rm -rf "$UV_HOME"
  "$PYTHON" -m venv "$UV_HOME"
  "$UV_HOME/bin/python" -m pip install --disable-pip-version-check -q ${QUANTA_FRESH:+--no-cache-dir} "uv==$UV_VERSION"
fi
export UV_PYTHON="$PYTHON" UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT="${VENV:-.venv}"
if [ -n "${QUANTA_FRESH:-}" ]; then export UV_NO_CACHE=1; fi
exec "$UV_HOME/bin/uv" "$@"
