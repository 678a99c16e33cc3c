"""Every exception httpx can raise has a kind and one line (mirror.jellyfin.failures)."""

from __future__ import annotations

import httpx
import pytest

from mirror.domain.errors import PermanentError, TransientError
from mirror.jellyfin.failures import RetryableError, classify_http_error

REQUEST = httpx.Request("GET", "http://jellyfin:8096/Items")
HEADER_QUOTE = "Illegal header value b'MediaBrowser Token=\"CANARYkey\\n\"'"


def _every_httpx_error() -> list[type[Exception]]:
    found: list[type[Exception]] = [httpx.InvalidURL]
    pending: list[type[Exception]] = [httpx.HTTPError, httpx.StreamError]
    while pending:
        kind = pending.pop()
        found.append(kind)
        pending.extend(kind.__subclasses__())
    return found


def _instance(kind: type[Exception]) -> Exception:
    if issubclass(kind, httpx.HTTPStatusError):
        return kind("500", request=REQUEST, response=httpx.Response(500, request=REQUEST))
    if issubclass(kind, httpx.RequestError):
        return kind("detail: [Errno 111] Connection refused", request=REQUEST)
    if issubclass(kind, httpx.StreamError) and kind is not httpx.StreamError:
        return kind()
    return kind("detail")


@pytest.mark.parametrize("kind", _every_httpx_error(), ids=lambda kind: kind.__name__)
def test_every_httpx_error_gets_a_kind_and_one_line(kind: type[Exception]) -> None:
    error = classify_http_error("GET", "/Items", _instance(kind))
    assert isinstance(error, PermanentError | TransientError)
    text = str(error)
    assert "GET /Items" in text and "\n" not in text and len(text) < 400


@pytest.mark.parametrize(
    ("error", "kind", "start"),
    [
        (httpx.TooManyRedirects("Exceeded", request=REQUEST), PermanentError, "Jellyfin redir"),
        (httpx.InvalidURL("Invalid port: 'x'"), PermanentError, "cannot request GET /Items"),
        (httpx.UnsupportedProtocol("ftp://", request=REQUEST), PermanentError, "cannot request"),
        (httpx.LocalProtocolError(HEADER_QUOTE, request=REQUEST), PermanentError, "mirror cannot"),
        (httpx.RemoteProtocolError("closed", request=REQUEST), RetryableError, "Jellyfin sent"),
        (httpx.ReadTimeout("timed out", request=REQUEST), RetryableError, "Jellyfin did not"),
        (httpx.ConnectError("refused", request=REQUEST), RetryableError, "Jellyfin unreachable"),
        (httpx.ProxyError("502", request=REQUEST), RetryableError, "the proxy in front"),
        (httpx.DecodingError("bad gzip", request=REQUEST), RetryableError, "Jellyfin's answer"),
    ],
)
def test_what_retrying_can_mend_is_retried_and_what_it_cannot_is_permanent(
    error: Exception, kind: type[Exception], start: str
) -> None:
    classified = classify_http_error("GET", "/Items", error)
    assert type(classified) is kind
    assert str(classified).startswith(start), classified


def test_a_rejected_header_is_never_quoted() -> None:
    error = httpx.LocalProtocolError(HEADER_QUOTE, request=REQUEST)
    assert "CANARY" not in str(classify_http_error("GET", "/Items", error))
