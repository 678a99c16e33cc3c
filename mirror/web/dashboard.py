"""The dashboard in `mirror serve`: its routes, and its API from settings and the adapters
mirror.wiring built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from werkzeug.routing import Rule

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.repository import JobRepository
from mirror.web.api import DashboardApi
from mirror.web.auth import UiAuth
from mirror.web.pages import DashboardPages

if TYPE_CHECKING:
    from mirror.settings import Settings

__all__ = ["DashboardApi", "dashboard_api", "dashboard_rules"]


def dashboard_api(
    settings: Settings, jobs: JobRepository, queries: DashboardQueries, attempts: AttemptLog
) -> DashboardApi:
    """The API with the login MIRROR_UI_PASSWORD asks for (none: read-only)."""
    password = settings.ui_password.get_secret_value() if settings.ui_password else None
    return DashboardApi(
        jobs,
        queries,
        attempts,
        UiAuth(password=password),
        stale_timeout_s=settings.stale_timeout,
        max_attempts=settings.max_attempts,
    )


def dashboard_rules(api: DashboardApi) -> list[Rule]:
    return [*api.rules(), *DashboardPages(api).rules()]
