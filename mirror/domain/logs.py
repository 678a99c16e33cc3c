"""Structured log lines: `time level logger key=value ... message`, one per event.

Job context (job, item, attempt, phase) rides on a LoggerAdapter so every line of an
attempt can be grepped by job id. Libraries that could print request details at debug
level (botocore, httpx) stay at WARNING so no credentials reach the log.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import MutableMapping
from typing import Any

from mirror.domain.redact import redact

QUIET_LIBRARIES = ("botocore", "boto3", "s3transfer", "urllib3", "httpx", "httpcore")


class ContextAdapter(logging.LoggerAdapter[logging.Logger]):
    """Prefixes each message with `key=value` pairs of its context."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        context = " ".join(
            f"{key}={value}" for key, value in (self.extra or {}).items() if value is not None
        )
        return (f"{context} {msg}" if context else msg), kwargs

    def bind(self, **context: Any) -> ContextAdapter:
        return ContextAdapter(self.logger, {**(self.extra or {}), **context})


class RedactSecrets(logging.Filter):
    """Renders each record's message (and traceback) once, with every secret masked.

    A filter on the handler, so records from any logger (httpx, tenacity, ours) pass it.
    """

    _traceback_formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._traceback_formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def get_logger(name: str, **context: Any) -> ContextAdapter:
    return ContextAdapter(logging.getLogger(name), context)


def setup_logging(level: str = "INFO") -> None:
    """One handler on stderr with UTC timestamps; safe to call more than once."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%S"
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
