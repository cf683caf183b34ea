#!/usr/bin/env bash
# The query page's third-party code: @zazuko/yasgui (YASGUI's editor and results table), from npm
# exactly as package-lock.json pins it (`npm ci`), copied into the folder the gateway serves,
# services/gateway/src/quanta/gateway/static/vendor (gitignored; the gateway's wheel carries it).
# So the page needs nothing from the internet at run time. Idempotent: does nothing when the folder
# was built from this lockfile and this script. Run by `make install` and the Dockerfile's web stage.
#   services/gateway/web/build.sh [OUT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../src/quanta/gateway/static/vendor}
stamp=".built-$(cat "$here/package-lock.json" "$here/build.sh" | sha256sum | cut -c1-16)"
[ -f "$out/$stamp" ] && exit 0
command -v npm >/dev/null || { echo "web assets: npm (Node.js 18 or later) is required" >&2; exit 1; }
(cd "$here" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
rm -rf "$out" && mkdir -p "$out"
cp "$here"/node_modules/@zazuko/yasgui/build/yasgui.min.{js,css} "$out/"
touch "$out/$stamp"
