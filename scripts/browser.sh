#!/usr/bin/env bash
# The browser the query page's tests drive (tests/e2e/test_query_page.py): Debian's Chromium, installed
# when missing (idempotent). Playwright (PyPI, pinned by uv.lock) drives it as /usr/bin/chromium;
# nothing downloads a browser of its own. Run by `make test` and `make test-fast`.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
printf '\033[1mbrowser:\033[0m installing Debian'"'"'s chromium (the query page'"'"'s tests)\n' >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
