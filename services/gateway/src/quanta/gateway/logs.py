"""Structured logs: one JSON object per line, each carrying the request id it belongs to."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from quanta.common.logs import JsonFormatter as _Json

# Set by the edge middleware for the duration of a request.
request_id: ContextVar[str] = ContextVar("request_id", default="")


class JsonFormatter(_Json):
    """The common JSON lines, plus the id of the request being served."""

    def context(self) -> dict[str, Any]:
        rid = request_id.get()
        return {"request_id": rid} if rid else {}


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """A dictConfig for the gateway and uvicorn (handed to uvicorn so every worker process uses it)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True, "level": level},
            "uvicorn.error": {"handlers": [], "propagate": True, "level": level},
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
        },
    }
