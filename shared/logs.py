"""Structured logs: one JSON object per line, configured only by the entry points.

Records carry ids (``jobId``, ``attemptNo``, ``runtimeId``, ``errorId``...) passed as ``extra``;
never payloads, prompts, outputs or secrets — those are not given to the logger in the first place.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

__all__ = ["JsonFormatter", "configure_logging"]

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str, **fixed: str) -> None:
        super().__init__()
        self._service = service
        self._fixed = fixed

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "service": self._service,
            "logger": record.name,
            "msg": record.getMessage(),
            **self._fixed,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if _plain(value) else str(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _plain(value: object) -> bool:
    """A value that goes into the line as JSON: a scalar, or a list of ids."""
    if isinstance(value, list):
        return all(isinstance(item, str | int) for item in value)
    return isinstance(value, str | int | float | bool | None)


def configure_logging(service: str, level: int = logging.INFO, **fixed: str) -> None:
    """JSON lines on stderr; ``fixed`` fields (e.g. ``runtimeId``) go on every line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service, **fixed))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Libraries that log request lines or URLs at INFO add noise, not facts an operator needs.
    for noisy in ("httpx", "httpx2", "openai", "alembic.runtime.plugins", "asyncmy"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
