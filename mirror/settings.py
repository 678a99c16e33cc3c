"""All configuration: `MIRROR_*` environment variables over an optional YAML file.

Validated once at start-up so a bad value stops the process with one line naming the
variable (exit 2), instead of failing an hour into a job.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import tempfile
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from mirror.domain.active_hours import ActiveHours, parse_active_hours
from mirror.domain.durations import (
    format_duration,
    parse_duration,
    parse_duration_or_zero,
    parse_rate,
    parse_size,
)
from mirror.domain.errors import ConfigError
from mirror.domain.redact import hide_url_password, register_secrets, url_password
from mirror.domain.renditions import DEFAULT_RENDITIONS, parse_renditions
from mirror.transcode.encoders import VideoEncoderSetting
from mirror.transcode.outputs import OutputFormat
from mirror.transcode.plan import AudioCodecSetting, VideoCodecSetting

ENV_PREFIX = "MIRROR_"
PoolingMode = Literal["off", "session", "transaction"]
CONFIG_ENV_VAR = "MIRROR_CONFIG"


def _clean_secret(value: Any) -> Any:
    """Strip surrounding whitespace (secrets files, YAML `|` blocks and CRLF `.env` files
    add a newline) and refuse what no header or password can carry: control characters
    and non-ASCII. The message never quotes the value."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if not isinstance(value, str):
        return value
    value = value.strip()
    for position, char in enumerate(value, start=1):
        if not char.isascii() or not char.isprintable():
            kind = "a non-ASCII" if not char.isascii() else "a control"
            raise ValueError(
                f"contains {kind} character (U+{ord(char):04X}) at position {position}; "
                "copy the secret again without it"
            )
    return value or None


def _split_commas(value: Any) -> Any:
    """`Movie, Episode` -> ("Movie", "Episode"); lists (from YAML) pass through."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _download_cap(value: Any) -> Any:
    """A whole number of downloads at once; empty (an unset compose variable) means 0: no cap."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0
        if not text.isdigit():
            raise ValueError(
                f"must be a whole number of downloads at once, e.g. 2 (0 or empty: no limit), "
                f"got {value!r}"
            )
        return int(text)
    return value


def _pooling_mode(value: Any) -> Any:
    """`Transaction ` -> `transaction`; empty (an unset compose variable) means `off`."""
    if isinstance(value, str):
        return value.strip().lower() or "off"
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
DurationOrZero = Annotated[float, BeforeValidator(parse_duration_or_zero)]
Rate = Annotated[float | None, BeforeValidator(parse_rate)]
Secret = Annotated[SecretStr | None, BeforeValidator(_clean_secret)]
Size = Annotated[int, BeforeValidator(parse_size)]
# NoDecode: the environment gives `Movie,Episode`, not the JSON pydantic expects for lists.
CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_split_commas)]

X264_PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
)

# The YAML file's values for the settings being built; a context variable so the source
# below can see them without a global that leaks between loads.
_yaml_values: ContextVar[dict[str, Any] | None] = ContextVar("_yaml_values", default=None)


def env_var(field_name: str) -> str:
    """The environment variable of a setting: `stale_timeout` -> `MIRROR_STALE_TIMEOUT`."""
    return ENV_PREFIX + field_name.upper()


class _YamlValues(PydanticBaseSettingsSource):
    """Lowest-priority source: the YAML file's values (the environment wins)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return (_yaml_values.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_yaml_values.get() or {})


class Settings(BaseSettings):
    """Every setting of README's Configuration table; durations in seconds, sizes in bytes."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", case_sensitive=False, frozen=True
    )

    database_url: str | None = None
    # What sits between the workers and Postgres (README: Connections at fleet size).
    # `transaction`: PgBouncer's transaction pooling - no LISTEN (poll), download slots
    # as leased rows, no prepared statements; `off`/`session`: a connection is a session.
    pgbouncer: Annotated[PoolingMode, BeforeValidator(_pooling_mode)] = "off"
    poll_interval: Duration = 2.0
    stale_timeout: Duration = 30 * 60.0
    heartbeat_interval: Duration = 10.0
    stall_timeout: Duration = 10 * 60.0
    reap_interval: Duration | None = None
    shutdown_grace: Duration = 30.0
    max_attempts: int = Field(default=3, ge=1)
    # When this worker may claim jobs, in its local time (TZ): `01:00-07:00`, over
    # midnight `22:00-06:00`, or a comma list; empty: any time (mirror.domain.active_hours).
    active_hours: str = ""
    concurrency: int = Field(default=1, ge=1, le=64)
    retry_backoff: Duration = 30.0
    # Jellyfin probes new files in its library scan, which can take hours on a big library.
    unprobed_timeout: Duration = 24 * 3600.0
    work_dir: Path = Field(default_factory=lambda: Path(tempfile.gettempdir()) / "mirror")
    free_space_reserve: Size = 0
    ffmpeg_path: str | None = None

    jellyfin_url: str | None = None
    jellyfin_api_key: Secret = None
    # Downloads from Jellyfin at once across every worker on every host (0: no cap);
    # the slots are advisory locks in Postgres (mirror.db.download_slots), or leased rows
    # with MIRROR_PGBOUNCER=transaction (mirror.db.slot_leases).
    jellyfin_max_downloads: Annotated[int, BeforeValidator(_download_cap)] = Field(
        default=0, ge=0, le=10_000
    )
    # Bytes per second per download (None: as fast as the link goes).
    download_rate_limit: Rate = None

    s3_bucket: str | None = None
    s3_prefix: str = ""
    s3_region: str = "us-east-1"
    s3_endpoint_url: str | None = None
    s3_access_key_id: Secret = None
    s3_secret_access_key: Secret = None
    # The S3 endpoint as a browser reaches it (a published port, a reverse-proxy path, a
    # CDN): the player's media URLs point there; unset: MIRROR_S3_ENDPOINT_URL.
    s3_public_url: str | None = None
    # true: the bucket (or the CDN at MIRROR_S3_PUBLIC_URL) serves the objects to anyone,
    # so the player links them unsigned; false: presigned URLs.
    s3_public_bucket: bool = False
    # 16 MiB: 1.4x the throughput of 64 MiB parts to the same endpoint (bench/upload.py);
    # S3 takes 10,000 parts per object: 16 MiB parts hold outputs up to 156 GiB each.
    s3_part_size: Size = 16 * 1024 * 1024

    video_codec: VideoCodecSetting = "auto"
    # Which H.264 encoder re-encodes: `auto` probes the GPU at worker start (a test
    # encode), else libx264; or libx264, h264_vaapi, h264_qsv, h264_nvenc.
    video_encoder: VideoEncoderSetting = "auto"
    audio_codec: AudioCodecSetting = "auto"
    x264_preset: Literal[X264_PRESETS] = "veryfast"  # type: ignore[valid-type]
    x264_crf: int = Field(default=23, ge=0, le=51)
    audio_bitrate: str = Field(default="160k", pattern=r"^\d+(\.\d+)?[kKmM]?$")
    # A stereo AAC track beside each multichannel one: centre-weighted (dialogue audible),
    # normalised to MIRROR_STEREO_LOUDNESS (LUFS integrated, EBU R128's -23 by default).
    stereo_track: bool = True
    stereo_loudness: float = Field(default=-23.0, ge=-70.0, le=-5.0)
    # hls: fragmented MP4 + playlists + WebVTT subtitles; mp4: faststart files only.
    output_format: OutputFormat = "hls"
    # Scrubbing thumbnails (sprite sheets + a WebVTT track under `thumbnails/`), one per
    # `thumbnail_interval`, from the video's keyframes in the same ffmpeg run.
    thumbnails: bool = True
    thumbnail_interval: Duration = Field(default=10.0, ge=1.0, le=3600.0)
    # The video renditions (ABR ladder): `source` and `<N>p` rungs, e.g. source,720p,480p.
    renditions: CommaList = DEFAULT_RENDITIONS
    # `mirror serve`'s player page: a local hls.min.js (from the npm package) instead of
    # the pinned CDN copy, for sites without internet access.
    hlsjs_path: Path | None = None

    webhook_secret: Secret = None
    webhook_item_types: CommaList = ("Movie", "Episode")
    # ItemDeleted webhook: false = log and count only; true = mark the item removed (its
    # objects go after the grace, with `mirror sync --delete`).
    delete_removed: bool = False
    # How long an item must stay gone from Jellyfin before its objects are deleted: a
    # library whose mount was offline during a scan comes back within it (0: no grace).
    delete_grace: DurationOrZero = 7 * 86400.0
    # The dashboard's login; unset: the dashboard and API are read-only (actions 403).
    ui_password: Secret = None
    # Signs session cookies; unset: a random key per process (sessions end at a restart).
    session_secret: Secret = None
    # Where browsers reach `mirror serve` (https://mirror.example.org behind a proxy): the
    # Origin a login must come from, and https makes the session cookie Secure.
    public_url: str | None = None
    # Proxies (IPs or CIDRs) whose X-Forwarded-For/-Proto/-Host/-Port are believed.
    trusted_proxies: CommaList = ()
    # A bearer token for GET /metrics (Prometheus `authorization`); else the UI login.
    metrics_token: Secret = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlValues(settings_cls))

    @field_validator("database_url")
    @classmethod
    def _psycopg_driver(cls, url: str | None) -> str | None:
        """Accept plain `postgresql://` (and `postgres://`) URLs; we always use psycopg 3."""
        if url is None or not url.strip():
            return None
        url = url.strip()
        if not url.isprintable():
            raise ValueError("contains a control character")
        try:
            urlsplit(url).port  # noqa: B018 - parsing the port is the check
        except ValueError:
            raise ValueError("the port must be a number, e.g. host:5432") from None
        for plain in ("postgresql://", "postgres://"):
            if url.startswith(plain):
                return "postgresql+psycopg://" + url[len(plain) :]
        if not url.startswith("postgresql+psycopg://"):
            raise ValueError("must be a postgresql:// or postgresql+psycopg:// URL")
        return url

    @field_validator("jellyfin_url", "s3_endpoint_url", "s3_public_url", "public_url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is None or not url.strip():
            return None
        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {url!r}")
        try:
            urlsplit(url).port  # noqa: B018 - parsing host and port is the check
        except ValueError as error:
            raise ValueError(f"is not a valid URL ({error}), got {url!r}") from None
        return url

    @field_validator("webhook_item_types")
    @classmethod
    def _some_item_types(cls, types: tuple[str, ...]) -> tuple[str, ...]:
        if not types:
            raise ValueError("needs at least one item type, e.g. Movie,Episode")
        return types

    @field_validator("renditions")
    @classmethod
    def _ladder(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return parse_renditions(names)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: tuple[str, ...]) -> tuple[str, ...]:
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"{proxy!r} is not an IP address or network (e.g. 10.0.0.5, 172.16.0.0/12)"
                ) from None
        return proxies

    @field_validator("active_hours")
    @classmethod
    def _windows(cls, value: str) -> str:
        return str(parse_active_hours(value))

    @field_validator("s3_prefix")
    @classmethod
    def _strip_slashes(cls, prefix: str) -> str:
        return prefix.strip().strip("/")

    def secret_values(self) -> list[str]:
        """Every configured secret: the SecretStr settings and the database password.

        The S3 access key id is an identifier (S3 names it in its own errors), not a secret.
        """
        values = [
            value.get_secret_value()
            for name in type(self).model_fields
            if name != "s3_access_key_id" and isinstance(value := getattr(self, name), SecretStr)
        ]
        password = url_password(self.database_url)
        return values + ([password] if password else [])

    @property
    def active_windows(self) -> ActiveHours:
        """MIRROR_ACTIVE_HOURS parsed (checked at load, so this never raises)."""
        return parse_active_hours(self.active_hours)

    @property
    def effective_reap_interval(self) -> float:
        """How often each worker runs the stale reaper: min(stale/3, 60s) unless set."""
        if self.reap_interval is not None:
            return self.reap_interval
        return min(self.stale_timeout / 3, 60.0)

    def check_timeouts(self) -> None:
        """The rule between timeouts: a live job must beat several times per stale window."""
        if self.heartbeat_interval > self.stale_timeout / 3:
            raise ConfigError(
                f"{env_var('heartbeat_interval')}={format_duration(self.heartbeat_interval)} "
                f"must be at most a third of {env_var('stale_timeout')}="
                f"{format_duration(self.stale_timeout)}, or live jobs could look stale"
            )
        if self.stall_timeout < self.heartbeat_interval:
            raise ConfigError(
                f"{env_var('stall_timeout')}={format_duration(self.stall_timeout)} must be at "
                f"least {env_var('heartbeat_interval')}={format_duration(self.heartbeat_interval)}"
            )

    def require(self, *field_names: str) -> None:
        """Fail with one line naming the first missing variable a command needs."""
        for name in field_names:
            value = getattr(self, name)
            if value is None or value == "":
                raise ConfigError(f"{env_var(name)} is not set (needed by this command)")

    @property
    def transaction_pooling(self) -> bool:
        """MIRROR_PGBOUNCER=transaction: no statement may rely on its session."""
        return self.pgbouncer == "transaction"

    @property
    def database_url_required(self) -> str:
        self.require("database_url")
        assert self.database_url is not None
        return self.database_url


_SECRET_FIELDS = frozenset(
    name for name, info in Settings.model_fields.items() if "SecretStr" in str(info.annotation)
)


def _read_yaml(path: Path) -> dict[str, Any]:
    """The YAML file's settings, keys as field names; unknown keys are errors."""
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, yaml.YAMLError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"config file {path} cannot be read: {first_line}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must be a mapping of setting: value")
    known = set(Settings.model_fields)
    values: dict[str, Any] = {}
    for raw_key, value in loaded.items():
        key = str(raw_key).lower()
        key = key.removeprefix(ENV_PREFIX.lower())
        if key not in known:
            hint = difflib.get_close_matches(key, sorted(known), n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"config file {path}: unknown setting {raw_key!r}{suggestion}")
        values[key] = value
    return values


def _describe(error: ValidationError, yaml_keys: set[str]) -> str:
    """One line naming the variable (or YAML key) of the first validation error."""
    first = error.errors()[0]
    loc = first.get("loc") or ()
    field = str(loc[0]) if loc else ""
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if field in Settings.model_fields:
        where = env_var(field)
        if field in yaml_keys and env_var(field) not in os.environ:
            where = f"{field} (config file)"
        raw = first.get("input")
        if field == "database_url" and isinstance(raw, str):
            raw = hide_url_password(raw.strip())
        secret = field in _SECRET_FIELDS
        shown = "" if secret or repr(raw) in message else f" (got {raw!r})"
        if first.get("type") == "missing":
            return f"{where} is required"
        return f"{where}: {message}{shown}"
    if first.get("type") == "extra_forbidden":
        return f"unknown setting {field!r}"
    return message


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build and check the settings: overrides > environment > YAML file > defaults."""
    path = config_file
    if path is None and os.environ.get(CONFIG_ENV_VAR):
        path = Path(os.environ[CONFIG_ENV_VAR])
    yaml_values = _read_yaml(path) if path is not None else {}
    token = _yaml_values.set(yaml_values)
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        raise ConfigError(_describe(error, set(yaml_values))) from None
    finally:
        _yaml_values.reset(token)
    register_secrets(settings.secret_values())
    settings.check_timeouts()
    return settings
