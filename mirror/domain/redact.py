"""The one redaction step: configured secret values never reach a log line or a stored error.

Adapters try not to quote secrets, but libraries do (httpx quotes a rejected header,
a driver may echo a URL). So every log record (see mirror.domain.logs) and every error written
to Postgres (see mirror.runner.attempt) passes through `redact`, which replaces the value of
every configured secret. The registry is process-wide because logging is: one process
runs with one set of settings, registered when they load.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from urllib.parse import quote, unquote, urlsplit, urlunsplit

MASK = "[redacted]"
# Shorter values would mask ordinary words in every message (a database password
# `mirror`, the demo's S3 key `demo`); a secret that short protects little anyway.
MIN_SECRET_LENGTH = 8

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first, so a secret containing another goes whole


def spellings(secret: str) -> set[str]:
    """The ways a secret shows up in text: as is, escaped (repr, JSON, with either quote
    escaped, as httpx quotes a header), URL-quoted."""
    escaped = {
        secret,
        secret.encode("unicode_escape").decode("ascii"),
        repr(secret.encode("utf-8"))[2:-1],
    }
    forms = {
        *escaped,
        *(form.replace("'", "\\'") for form in escaped),
        *(form.replace('"', '\\"') for form in escaped),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote(secret),
    }
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def register_secrets(values: Iterable[str | None]) -> None:
    """Add secret values to redact from now on (registering twice is harmless)."""
    global _secrets
    new = {form for value in values if value for form in spellings(value)}
    with _lock:
        _secrets = tuple(sorted(set(_secrets) | new, key=len, reverse=True))


def forget_secrets() -> None:
    """Drop every registered secret (tests that load settings with other values)."""
    global _secrets
    with _lock:
        _secrets = ()


def redact(text: str) -> str:
    """`text` with every registered secret replaced by `[redacted]`."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def url_password(url: str | None) -> str | None:
    """The password of a `scheme://user:password@host/...` URL, percent-decoded."""
    if not url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def hide_url_password(url: str) -> str:
    """The URL with its password replaced by `***`, for messages that must show it."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "(unparsable URL)"
    if not password:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))
