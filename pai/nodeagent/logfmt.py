"""Structured ``key=value`` log lines: every line of the agent carries its node and, where known, the attempt.

Use :func:`bind` to get a logger whose lines carry fixed fields; pass more per call with ``extra=``::

    log = bind(logging.getLogger("pai.nodeagent"), node="worker-1")
    log.info("attempt started", extra={"attempt": "a1", "job": "alice~mnist"})
    # 2024-05-01T10:00:00 INFO pai.nodeagent attempt started node=worker-1 attempt=a1 job=alice~mnist
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

# The attributes every LogRecord has; anything else on a record came in through ``extra``.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


def _quote(value: object) -> str:
    text = str(value)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of a record, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


class KeyValueFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger> <message> k=v k=v``; exceptions follow on the next lines."""

    def __init__(self) -> None:
        super().__init__(datefmt="%Y-%m-%dT%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        head = f"{self.formatTime(record, self.datefmt)} {record.levelname} {record.name} {record.getMessage()}"
        tail = " ".join(f"{k}={_quote(v)}" for k, v in fields_of(record).items() if v is not None)
        line = f"{head} {tail}" if tail else head
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class BoundLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger adapter that merges its fixed fields with the ``extra`` of each call."""

    def __init__(self, logger: logging.Logger, fields: Mapping[str, object]) -> None:
        super().__init__(logger, dict(fields))

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs

    def bind(self, **fields: object) -> BoundLogger:
        return BoundLogger(self.logger, {**(self.extra or {}), **fields})


def bind(logger: logging.Logger, **fields: object) -> BoundLogger:
    return BoundLogger(logger, fields)


def configure(level: int = logging.INFO) -> None:
    """Send the root logger's lines to stderr in the key=value format (used by the CLI)."""
    handler = logging.StreamHandler()
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
