"""The query page (docs/web.md): `GET /` and its files under `/static`.

The page is static: it lists the datasets (`/v1/datasets`, with their example
queries) and runs queries on the SPARQL endpoint's progress stream
(`Accept: text/event-stream`, sparql_endpoint/progress.py). Its third-party code (YASGUI) is
built into `static/vendor` at install time (services/gateway/web/build.sh),
so the page loads nothing from elsewhere; the Content-Security-Policy holds
it to that: scripts, styles and requests from this origin only, no inline
code, no frames, no forms sent anywhere.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

log = logging.getLogger("quanta.gateway")
STATIC = Path(__file__).resolve().parents[1] / "static"
VENDOR = STATIC / "vendor" / "yasgui.min.js"
CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        # YASGUI's table adds two fixed <style> elements (its column resizer's rules, and the cursor
        # while a column is dragged): allowed by hash. The browser tests fail on any violation, so
        # a YASGUI upgrade that changes them says so.
        "style-src 'self' 'sha256-zCK2EVMoPc04mRF/g5CotUvxbJPWS+8V0b+s9ptqQIk=' "
        "'sha256-c0O6TmFAkgpNbHxKAa1BrveWHHopjEtC47i0PzMudxg='",
        "img-src 'self' data:",  # YASGUI's icons are data: URIs
        "font-src 'self'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}

router = APIRouter(tags=["web"])


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False, name="query_page")
async def query_page() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers=PAGE_HEADERS)


def static_files() -> StaticFiles:
    """The page's files (mounted at /static)."""
    if not VENDOR.exists():
        log.warning("the query page's assets are not built: run services/gateway/web/build.sh (make install does)")
    return StaticFiles(directory=STATIC)
