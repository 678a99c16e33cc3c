"""How Jellyfin's answers and network failures become mirror's error kinds, and retries.

Each failure gets one message a person can act on. Messages name the request path (the
API key travels only in a header, so paths are safe to show) and never a response body
or header that could echo the key.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import tenacity

from mirror.domain.errors import PermanentError, RetriesExhausted, TransientError

logger = logging.getLogger("mirror.jellyfin")

_RETRYABLE_STATUSES = frozenset({408, 425, 429})
MAX_REDIRECTS = 20  # httpx's default, set explicitly so the loop message can name it


class RetryableError(TransientError):
    """A failure worth retrying at once (network, 5xx); `retry_after` is the server's hint."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status  # the HTTP status Jellyfin answered; None for network failures


class ItemNotFound(PermanentError):
    """Jellyfin answered 404 to a call about one item (`item_id`).

    Permanent unless the caller learns otherwise: /Items/{id}/Download also answers 404
    when the item is known but its file is missing on disk (see `file_missing`).
    """

    def __init__(self, message: str, *, item_id: str) -> None:
        super().__init__(message)
        self.item_id = item_id


def file_missing(item_id: str) -> TransientError:
    """The error for a 404 from /Download while Jellyfin still lists the item.

    Jellyfin's LibraryController.GetDownload answers with PhysicalFile(item.Path); a file
    that is not on disk throws FileNotFoundException (DirectoryNotFoundException for a
    missing folder), which Jellyfin.Api/Middleware/ExceptionMiddleware.cs turns into a
    plain 404 - the same status as an unknown item. An unmounted share or a NAS that is
    asleep looks like this, and mends itself, so the job is retried with backoff.
    """
    return TransientError(
        f"source file missing on the server: Jellyfin still lists item {item_id} but "
        "answers 404 for its file; check that the share or NAS holding it is mounted "
        "and awake (the job is retried)"
    )


def size_mismatch(item_id: str, served: int, reported: int) -> TransientError:
    """Jellyfin serves another size than its metadata's: the file changed after its scan.

    A library scan does not mend this when the mtime stayed the same (a copy that keeps
    mtimes, a restore): Jellyfin's providers re-read a file only when its
    LastWriteTimeUtc differs from the stored DateModified (`HasChanged` of
    MediaBrowser.Providers/MediaInfo/ProbeProvider.cs). A forced refresh re-reads it
    whatever the date, as does a new mtime.
    """
    return TransientError(
        f"Jellyfin serves {served} bytes for item {item_id} but reported {reported} "
        "(MediaSources Size): the file changed on the server after Jellyfin scanned it; "
        "refresh the item's metadata in Jellyfin (Refresh metadata > Replace all metadata) "
        "or touch the file and rescan, then retry"
    )


def describe_transport_error(method: str, path: str, exc: httpx.TransportError) -> str:
    """`Jellyfin unreachable (GET /Items): ConnectError: [Errno 111] Connection refused`."""
    detail = str(exc).strip()
    kind = type(exc).__name__
    summary = f"{kind}: {detail[:200]}" if detail else kind
    if isinstance(exc, httpx.TimeoutException):
        return f"Jellyfin did not answer in time ({method} {path}): {summary}"
    return f"Jellyfin unreachable ({method} {path}): {summary}"


def classify_http_error(method: str, path: str, exc: Exception) -> TransientError | PermanentError:
    """The error kind, with one line a person can act on, for anything httpx raises.

    Covers httpx's whole hierarchy (and InvalidURL, which sits outside it): what retrying
    can mend is a RetryableError, what it cannot (a redirect loop, a URL or request httpx
    will not send) is permanent. Anything else is transient, named by its type.
    """
    where = f"{method} {path}"
    kind = type(exc).__name__
    if isinstance(exc, httpx.TooManyRedirects):
        return PermanentError(
            f"Jellyfin redirected {where} more than {MAX_REDIRECTS} times (a redirect "
            "loop): check MIRROR_JELLYFIN_URL (http or https, the base path, a proxy's rules)"
        )
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return PermanentError(
            f"cannot request {where}: {_first_line(exc, 200) or kind} "
            "(check MIRROR_JELLYFIN_URL, or where Jellyfin redirects to)"
        )
    if isinstance(exc, httpx.LocalProtocolError):
        # httpx quotes the offending header here, and that header carries the API key.
        return PermanentError(
            f"mirror cannot send a valid HTTP request for {where} ({kind}): "
            "check MIRROR_JELLYFIN_URL and MIRROR_JELLYFIN_API_KEY"
        )
    if isinstance(exc, httpx.RemoteProtocolError):
        return RetryableError(
            f"Jellyfin sent a broken HTTP answer ({where}): {kind}: {_first_line(exc, 200)}"
        )
    if isinstance(exc, httpx.ProxyError):
        return RetryableError(
            f"the proxy in front of Jellyfin failed ({where}): {_first_line(exc, 200)}"
        )
    if isinstance(exc, httpx.TransportError):  # timeouts and network errors
        return RetryableError(describe_transport_error(method, path, exc))
    if isinstance(exc, httpx.DecodingError):
        return RetryableError(
            f"Jellyfin's answer to {where} could not be decoded (its Content-Encoding or "
            f"charset is broken): {_first_line(exc, 200)}"
        )
    detail = _first_line(exc, 200)
    return TransientError(f"request {where} failed: {kind}" + (f": {detail}" if detail else ""))


def _first_line(exc: Exception, limit: int) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else ""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def raise_for_status(response: httpx.Response, path: str, item_id: str | None = None) -> None:
    """Raise the error kind for a non-2xx answer; return quietly on success.

    `item_id` is set for calls about one item, so 400/403/404 can name it.
    """
    status = response.status_code
    if status < 300:
        return
    method = response.request.method
    if status == 401:
        raise PermanentError("Jellyfin rejected the API key (401)")
    if status == 403:
        what = f"item {item_id}" if item_id else f"{method} {path}"
        raise PermanentError(
            f"Jellyfin refused access to {what} (403): the API key's user may not download"
        )
    if status == 404:
        if item_id:
            raise ItemNotFound(f"item {item_id} not found in Jellyfin", item_id=item_id)
        raise PermanentError(
            f"Jellyfin answered 404 for {method} {path}: is the Jellyfin URL right?"
        )
    if status == 400 and item_id:
        raise PermanentError(
            f"Jellyfin cannot serve item {item_id} (400: not a valid id or not downloadable)"
        )
    if status >= 500 or status in _RETRYABLE_STATUSES:
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        reason = response.headers.get("Message", "").strip()[:200]
        message = f"Jellyfin answered {status} ({method} {path})"
        raise RetryableError(
            f"{message}: {reason}" if reason else message, retry_after=retry_after, status=status
        )
    raise PermanentError(f"Jellyfin answered {status} for {method} {path}")


@dataclass
class FailureBudget:
    """Counts failed tries in a row; a try that made progress starts the count afresh.

    A download cut every few hundred MB by a proxy keeps advancing, so it must not run
    out of retries the way a server that refuses every connection does.
    """

    failures_in_a_row: int = 0

    def note_failure(self, *, progressed: bool) -> None:
        self.failures_in_a_row = 1 if progressed else self.failures_in_a_row + 1


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff over `attempts` tries; the server's Retry-After wins if given."""

    attempts: int = 5
    initial_wait: float = 0.5
    max_wait: float = 30.0

    def wait_seconds(self, exc: BaseException | None, failures_in_a_row: int) -> float:
        hint = exc.retry_after if isinstance(exc, RetryableError) else None
        if hint is not None:
            return min(hint, self.max_wait)
        return min(self.initial_wait * 2.0 ** max(0, failures_in_a_row - 1), self.max_wait)

    def retrying(
        self,
        budget: FailureBudget | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> tenacity.Retrying:
        """A tenacity loop retrying `RetryableError` only; other errors pass straight out.

        Without a `budget` every failure counts; with one, the caller records failures
        (and progress) itself.
        """
        counter = budget

        def failures(state: tenacity.RetryCallState) -> int:
            return counter.failures_in_a_row if counter is not None else state.attempt_number

        def stop(state: tenacity.RetryCallState) -> bool:
            return failures(state) >= self.attempts

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            return self.wait_seconds(exc, failures(state))

        def log_retry(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            delay = state.next_action.sleep if state.next_action is not None else 0.0
            logger.warning("%s; retrying in %.1f s", exc, delay)

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(RetryableError),
            stop=stop,
            wait=wait,
            sleep=sleep,
            before_sleep=log_retry,
            reraise=True,
        )


def give_up(exc: RetryableError, attempts: int) -> RetriesExhausted:
    """The error the worker sees once retries are spent: transient, with the last cause."""
    message = f"{exc} (gave up after {attempts} failed tries in a row)"
    return RetriesExhausted(message, status=exc.status)
