"""The dashboard's login: a signed session cookie, CSRF tokens, failed logins throttled.

A session is a random id in a cookie signed with itsdangerous (timestamped, 12 h). The
key comes from MIRROR_SESSION_SECRET and MIRROR_UI_PASSWORD together: changing either
ends every session, and without a configured secret each process draws a random one,
so sessions end when `mirror serve` restarts (and several instances need the secret).
Logging out records the id as ended (Postgres, `media_mirror.ended_sessions`), so a
copied cookie stops working on every instance. The CSRF token is a MAC over the id: a
page of ours can read it, another site cannot, and a POST must send it back in the
`X-CSRF-Token` header. Without a password there are no sessions: read-only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from werkzeug.wrappers import Request, Response

from mirror.web.throttle import LoginThrottle

COOKIE = "mirror_session"
CSRF_HEADER = "X-CSRF-Token"
SESSION_S = 12 * 3600


class EndedSessions(Protocol):
    """Session ids logged out before their cookie expires (shared by every instance)."""

    def end(self, session_id: str, ttl_s: float) -> None: ...

    def has_ended(self, session_id: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Session:
    nonce: str
    csrf_token: str


@dataclass(frozen=True, slots=True)
class LoginResult:
    """A cookie value for the right password, else how long the client must wait."""

    cookie: str | None
    retry_after_s: int | None = None


@dataclass(slots=True)
class UiAuth:
    """Checks logins and sessions; `password` None means read-only, no login at all."""

    password: str | None = field(repr=False)
    ended: EndedSessions | None = None
    secret: str | None = field(default=None, repr=False)  # None: random, this process only
    public_url: str | None = None  # MIRROR_PUBLIC_URL: the Origin browsers send
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    _serializer: URLSafeTimedSerializer | None = field(default=None, init=False, repr=False)

    @property
    def enabled(self) -> bool:
        return bool(self.password)

    def _key(self) -> bytes:
        assert self.password is not None
        if self.secret is None:
            self.secret = secrets.token_urlsafe(32)
        message = b"mirror-ui-session\0" + self.password.encode()
        return hmac.new(self.secret.encode(), message, hashlib.sha256).digest()

    def _signer(self) -> URLSafeTimedSerializer:
        if self._serializer is None:
            self._serializer = URLSafeTimedSerializer(self._key(), salt="mirror-session")
        return self._serializer

    def _mac(self, message: str) -> str:
        return hmac.new(self._key(), message.encode(), hashlib.sha256).hexdigest()

    def login(self, given: str, client: str) -> LoginResult:
        """A session cookie for the right password; a throttled client is not even checked."""
        if not self.enabled:
            return LoginResult(None)
        assert self.password is not None
        wait = self.throttle.retry_after(client)
        if wait is not None:
            return LoginResult(None, wait)
        if not hmac.compare_digest(given.encode(), self.password.encode()):
            self.throttle.failed(client)
            return LoginResult(None)
        self.throttle.succeeded(client)
        return LoginResult(self._signer().dumps(secrets.token_urlsafe(18)))

    def session(self, request: Request) -> Session | None:
        """The request's valid, unexpired session that was not logged out, else None."""
        nonce = self._nonce(request.cookies.get(COOKIE, ""))
        if nonce is None or (self.ended is not None and self.ended.has_ended(nonce)):
            return None
        return Session(nonce=nonce, csrf_token=self._mac(f"csrf:{nonce}"))

    def end(self, request: Request) -> None:
        """Log out: the cookie's session is refused from now on, whoever sends it."""
        nonce = self._nonce(request.cookies.get(COOKIE, ""))
        if nonce is not None and self.ended is not None:
            self.ended.end(nonce, SESSION_S)

    def _nonce(self, cookie: str) -> str | None:
        if not self.enabled or not cookie:
            return None
        try:
            nonce = self._signer().loads(cookie, max_age=SESSION_S)
        except BadSignature:  # also SignatureExpired
            return None
        return nonce if isinstance(nonce, str) and nonce else None

    def same_origin(self, request: Request) -> bool:
        """A browser's Origin, when sent, is where people reach us (MIRROR_PUBLIC_URL, or
        the request's own scheme and host as the trusted proxies report them)."""
        origin = request.headers.get("Origin")
        return origin is None or origin == self.origin(request)

    def origin(self, request: Request) -> str:
        if self.public_url:
            parts = urlsplit(self.public_url)
            return f"{parts.scheme}://{parts.netloc}"
        return request.host_url.rstrip("/")

    def secure(self, request: Request) -> bool:
        """The cookie gets Secure when browsers reach us over https."""
        return self.origin(request).startswith("https://")

    def csrf_ok(self, request: Request, session: Session) -> bool:
        """The header token matches the session, and a browser's Origin (if sent) is ours."""
        if not self.same_origin(request):
            return False
        given = request.headers.get(CSRF_HEADER, "")
        return hmac.compare_digest(given.encode(), session.csrf_token.encode())


def set_session_cookie(response: Response, value: str, *, secure: bool) -> None:
    response.set_cookie(
        COOKIE, value, max_age=SESSION_S, httponly=True, samesite="Strict", secure=secure, path="/"
    )


def clear_session_cookie(response: Response, *, secure: bool) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict", secure=secure)
