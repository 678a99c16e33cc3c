"""The dashboard in `mirror serve`: its routes, and its API from settings and the adapters
mirror.wiring built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from werkzeug.routing import Rule

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.repository import JobRepository
from mirror.web.api import DashboardApi
from mirror.web.auth import EndedSessions, UiAuth
from mirror.web.pages import DashboardPages

if TYPE_CHECKING:
    from mirror.settings import Settings

__all__ = ["DashboardApi", "dashboard_api", "dashboard_rules"]


def dashboard_api(
    settings: Settings,
    jobs: JobRepository,
    queries: DashboardQueries,
    attempts: AttemptLog,
    ended: EndedSessions | None = None,
) -> DashboardApi:
    """The API with the login MIRROR_UI_PASSWORD asks for (none: read-only)."""
    return DashboardApi(
        jobs,
        queries,
        attempts,
        ui_auth(settings, ended),
        stale_timeout_s=settings.stale_timeout,
        max_attempts=settings.max_attempts,
    )


def ui_auth(settings: Settings, ended: EndedSessions | None = None) -> UiAuth:
    """The login of MIRROR_UI_PASSWORD, signed with MIRROR_SESSION_SECRET when set."""
    password = settings.ui_password.get_secret_value() if settings.ui_password else None
    secret = settings.session_secret.get_secret_value() if settings.session_secret else None
    return UiAuth(password=password, ended=ended, secret=secret, public_url=settings.public_url)


def dashboard_rules(api: DashboardApi) -> list[Rule]:
    return [*api.rules(), *DashboardPages(api).rules()]
