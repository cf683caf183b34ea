"""Logs as one JSON object per line on stderr, in every role (gateway, worker, loader): a traceback
is a field of its record (`exc`), never lines of its own, so a log collector keeps each event whole."""

from __future__ import annotations

import json
import logging
import sys
import threading
from contextvars import ContextVar
from types import TracebackType
from typing import Any

# Attributes every LogRecord has; anything else was passed with `extra=` and is logged as a field.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName", "color_message"}


# The id of the HTTP request being served: set by the gateway's edge middleware for its duration.
request_id: ContextVar[str] = ContextVar("request_id", default="")


class JsonFormatter(logging.Formatter):
    """`ts`, `level`, `logger`, `pid`, `msg`, `request_id` while serving one, the record's extra
    fields, and `exc` for a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "msg": record.getMessage(),
        }
        if rid := request_id.get():
            doc["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, default=str)


def setup_json_logging(level: str = "INFO") -> None:
    """JSON lines on stderr for the whole process, uncaught exceptions included."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    sys.excepthook = _log_uncaught
    threading.excepthook = lambda a: _log_uncaught(a.exc_type, a.exc_value, a.exc_traceback)  # type: ignore[arg-type]


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        return
    logging.getLogger("quanta").critical("uncaught exception", exc_info=(kind, value, tb))
