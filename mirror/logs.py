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
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
