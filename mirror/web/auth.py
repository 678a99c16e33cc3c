"""The dashboard's login: a signed session cookie, CSRF tokens, a delay after a failure.

Stateless like the rest of `mirror serve` (several can run): a session is
`expires.nonce.mac`, signed with a key derived from MIRROR_UI_PASSWORD, so changing the
password ends every session. The CSRF token is a second MAC over the session's nonce:
a page of ours can read it, another site cannot, and a POST must send it back in the
`X-CSRF-Token` header. Without a password there are no sessions: read-only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from werkzeug.wrappers import Request, Response

COOKIE = "mirror_session"
CSRF_HEADER = "X-CSRF-Token"
SESSION_S = 12 * 3600
FAILED_LOGIN_DELAY_S = 1.0  # per failed try: slows guessing, harmless to people


@dataclass(frozen=True, slots=True)
class Session:
    nonce: str
    csrf_token: str


@dataclass(slots=True)
class UiAuth:
    """Checks logins and sessions; `password` None means read-only, no login at all."""

    password: str | None = field(repr=False)
    failed_login_delay_s: float = FAILED_LOGIN_DELAY_S
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    @property
    def enabled(self) -> bool:
        return bool(self.password)

    def _key(self) -> bytes:
        assert self.password is not None
        return hashlib.sha256(b"mirror-ui-session\0" + self.password.encode()).digest()

    def _mac(self, message: str) -> str:
        return hmac.new(self._key(), message.encode(), hashlib.sha256).hexdigest()

    def login(self, given: str) -> str | None:
        """A new session cookie value for the right password; None (after a delay) if not."""
        if not self.enabled:
            return None
        assert self.password is not None
        if not hmac.compare_digest(given.encode(), self.password.encode()):
            self.sleep(self.failed_login_delay_s)
            return None
        body = f"{int(self.clock()) + SESSION_S}.{secrets.token_urlsafe(18)}"
        return f"{body}.{self._mac(body)}"

    def session(self, request: Request) -> Session | None:
        """The request's valid, unexpired session, else None."""
        if not self.enabled:
            return None
        value = request.cookies.get(COOKIE, "")
        body, _, mac = value.rpartition(".")
        expires, _, nonce = body.partition(".")
        if not (body and nonce and expires.isdigit()):
            return None
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            return None
        if int(expires) < self.clock():
            return None
        return Session(nonce=nonce, csrf_token=self._mac(f"csrf:{nonce}"))

    def csrf_ok(self, request: Request, session: Session) -> bool:
        """The header token matches the session, and a browser's Origin (if sent) is ours."""
        origin = request.headers.get("Origin")
        if origin is not None and origin != request.host_url.rstrip("/"):
            return False
        given = request.headers.get(CSRF_HEADER, "")
        return hmac.compare_digest(given.encode(), session.csrf_token.encode())


def set_session_cookie(response: Response, value: str, *, secure: bool) -> None:
    response.set_cookie(
        COOKIE, value, max_age=SESSION_S, httponly=True, samesite="Strict", secure=secure, path="/"
    )


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict")
