"""The dashboard in `mirror serve`: its routes, and its API from settings and the adapters
mirror.wiring built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from werkzeug.routing import Rule

from mirror.db.attempt_log import AttemptLog
from mirror.db.dashboard import DashboardQueries
from mirror.db.repository import JobRepository
from mirror.db.sync_jobs import SyncJobStore
from mirror.web.api import DashboardApi
from mirror.web.auth import EndedSessions, UiAuth
from mirror.web.libraries import JellyfinFactory, LibraryBoard
from mirror.web.library_api import LibraryApi
from mirror.web.pages import DashboardPages

if TYPE_CHECKING:
    from mirror.settings import Settings
    from mirror.wiring import Database

__all__ = ["dashboard_api", "dashboard_rules", "library_board"]


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
        active_hours=settings.active_windows,
    )


def ui_auth(settings: Settings, ended: EndedSessions | None = None) -> UiAuth:
    """The login of MIRROR_UI_PASSWORD, signed with MIRROR_SESSION_SECRET when set."""
    password = settings.ui_password.get_secret_value() if settings.ui_password else None
    secret = settings.session_secret.get_secret_value() if settings.session_secret else None
    return UiAuth(password=password, ended=ended, secret=secret, public_url=settings.public_url)


def library_board(
    settings: Settings, db: Database, jellyfin: JellyfinFactory | None
) -> LibraryBoard:
    """Search, sweeps and library counts; without Jellyfin (None) they answer 503."""
    return LibraryBoard(
        jellyfin,
        SyncJobStore(db.mirrored, db.removals, db.jobs, settings.max_attempts),
        db.jobs,
        item_types=settings.webhook_item_types,
        max_attempts=settings.max_attempts,
    )


def dashboard_rules(api: DashboardApi, board: LibraryBoard | None = None) -> list[Rule]:
    library = [] if board is None else LibraryApi(api, board).rules()
    return [*api.rules(), *library, *DashboardPages(api, board).rules()]
