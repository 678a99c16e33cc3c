"""Settings: every variable parsed, human durations, YAML below the environment, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.domain.durations import parse_duration, parse_size
from mirror.domain.errors import ConfigError
from mirror.settings import Settings, env_var, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("MIRROR_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10),
        ("30m", 1800),
        ("1h", 3600),
        ("2d", 172800),
        ("45", 45),
        ("1.5s", 1.5),
        (" 10 S ", 10),
        (7, 7.0),
    ],
)
def test_durations_accept_human_forms(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "10x", "-5s", "0", "1h30", True])
def test_bad_durations_are_rejected(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_sizes_accept_binary_and_decimal_units() -> None:
    assert parse_size("64MiB") == 64 * 1024**2
    assert parse_size("5MB") == 5_000_000
    assert parse_size("1GiB") == 1024**3
    assert parse_size("1024") == 1024


def test_defaults_match_design() -> None:
    settings = load_settings()
    assert settings.poll_interval == 2
    assert settings.stale_timeout == 1800
    assert settings.heartbeat_interval == 10
    assert settings.stall_timeout == 600
    assert settings.effective_reap_interval == 60  # min(stale/3, 60s)
    assert settings.shutdown_grace == 30
    assert settings.max_attempts == 3
    assert settings.concurrency == 1
    assert settings.work_dir.name == "mirror"
    assert settings.s3_prefix == ""
    assert settings.s3_region == "us-east-1"
    assert (settings.video_codec, settings.audio_codec) == ("auto", "auto")
    assert (settings.x264_preset, settings.x264_crf, settings.audio_bitrate) == (
        "veryfast",
        23,
        "160k",
    )


ALL_VARIABLES = {
    "MIRROR_DATABASE_URL": (
        "postgresql://u@db/mirror",
        "database_url",
        "postgresql+psycopg://u@db/mirror",
    ),
    "MIRROR_POLL_INTERVAL": ("500ms", "poll_interval", 0.5),
    "MIRROR_STALE_TIMEOUT": ("1h", "stale_timeout", 3600.0),
    "MIRROR_HEARTBEAT_INTERVAL": ("20s", "heartbeat_interval", 20.0),
    "MIRROR_STALL_TIMEOUT": ("15m", "stall_timeout", 900.0),
    "MIRROR_REAP_INTERVAL": ("30", "reap_interval", 30.0),
    "MIRROR_SHUTDOWN_GRACE": ("1m", "shutdown_grace", 60.0),
    "MIRROR_MAX_ATTEMPTS": ("5", "max_attempts", 5),
    "MIRROR_CONCURRENCY": ("4", "concurrency", 4),
    "MIRROR_WORK_DIR": ("/var/tmp/m", "work_dir", Path("/var/tmp/m")),
    "MIRROR_FFMPEG_PATH": ("/usr/bin/ffmpeg", "ffmpeg_path", "/usr/bin/ffmpeg"),
    "MIRROR_JELLYFIN_URL": ("http://jf:8096/", "jellyfin_url", "http://jf:8096"),
    "MIRROR_S3_BUCKET": ("media", "s3_bucket", "media"),
    "MIRROR_S3_PREFIX": ("/mirror/", "s3_prefix", "mirror"),
    "MIRROR_S3_REGION": ("eu-west-1", "s3_region", "eu-west-1"),
    "MIRROR_S3_ENDPOINT_URL": ("http://minio:9000", "s3_endpoint_url", "http://minio:9000"),
    "MIRROR_VIDEO_CODEC": ("libx264", "video_codec", "libx264"),
    "MIRROR_AUDIO_CODEC": ("copy", "audio_codec", "copy"),
    "MIRROR_X264_PRESET": ("medium", "x264_preset", "medium"),
    "MIRROR_X264_CRF": ("20", "x264_crf", 20),
    "MIRROR_AUDIO_BITRATE": ("192k", "audio_bitrate", "192k"),
}
SECRETS = {
    "MIRROR_JELLYFIN_API_KEY": "jellyfin_api_key",
    "MIRROR_S3_ACCESS_KEY_ID": "s3_access_key_id",
    "MIRROR_S3_SECRET_ACCESS_KEY": "s3_secret_access_key",
    "MIRROR_WEBHOOK_SECRET": "webhook_secret",
}


def test_every_variable_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, (raw, _, _) in ALL_VARIABLES.items():
        monkeypatch.setenv(variable, raw)
    for variable in SECRETS:
        monkeypatch.setenv(variable, f"secret-of-{variable}")
    settings = load_settings()
    for variable, (_, field, expected) in ALL_VARIABLES.items():
        assert getattr(settings, field) == expected, variable
        assert env_var(field) == variable
    for variable, field in SECRETS.items():
        secret = getattr(settings, field)
        assert secret.get_secret_value() == f"secret-of-{variable}"
        assert f"secret-of-{variable}" not in repr(settings)
        assert f"secret-of-{variable}" not in str(settings)


def test_every_design_variable_is_a_setting() -> None:
    fields = set(Settings.model_fields)
    for variable in [*ALL_VARIABLES, *SECRETS]:
        assert variable.removeprefix("MIRROR_").lower() in fields


@pytest.mark.parametrize(
    ("variable", "value", "expected_text"),
    [
        ("MIRROR_STALE_TIMEOUT", "soon", "MIRROR_STALE_TIMEOUT"),
        ("MIRROR_POLL_INTERVAL", "-1s", "MIRROR_POLL_INTERVAL"),
        ("MIRROR_MAX_ATTEMPTS", "zero", "MIRROR_MAX_ATTEMPTS"),
        ("MIRROR_CONCURRENCY", "0", "MIRROR_CONCURRENCY"),
        ("MIRROR_VIDEO_CODEC", "h265", "MIRROR_VIDEO_CODEC"),
        ("MIRROR_AUDIO_CODEC", "opus", "MIRROR_AUDIO_CODEC"),
        ("MIRROR_OUTPUT_FORMAT", "dash", "MIRROR_OUTPUT_FORMAT"),
        ("MIRROR_THUMBNAILS", "sometimes", "MIRROR_THUMBNAILS"),
        ("MIRROR_THUMBNAIL_INTERVAL", "0.5s", "MIRROR_THUMBNAIL_INTERVAL"),
        ("MIRROR_DATABASE_URL", "mysql://x", "MIRROR_DATABASE_URL"),
        ("MIRROR_JELLYFIN_URL", "jellyfin:8096", "MIRROR_JELLYFIN_URL"),
    ],
)
def test_bad_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, expected_text: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert expected_text in message
    assert "\n" not in message


def test_heartbeat_above_a_third_of_stale_is_rejected_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MIRROR_STALE_TIMEOUT", "30s")
    monkeypatch.setenv("MIRROR_HEARTBEAT_INTERVAL", "11s")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "MIRROR_HEARTBEAT_INTERVAL=11s" in str(caught.value)
    assert "MIRROR_STALE_TIMEOUT=30s" in str(caught.value)
    monkeypatch.setenv("MIRROR_HEARTBEAT_INTERVAL", "10s")
    assert load_settings().heartbeat_interval == 10


def test_reap_interval_follows_a_short_stale_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIRROR_STALE_TIMEOUT", "3s")
    monkeypatch.setenv("MIRROR_HEARTBEAT_INTERVAL", "500ms")
    assert load_settings().effective_reap_interval == 1.0


def test_yaml_file_is_read_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text("stale_timeout: 10m\nheartbeat_interval: 5s\ns3_bucket: from-yaml\n")
    monkeypatch.setenv("MIRROR_S3_BUCKET", "from-env")
    settings = load_settings(config)
    assert settings.stale_timeout == 600
    assert settings.heartbeat_interval == 5
    assert settings.s3_bucket == "from-env"
    monkeypatch.setenv("MIRROR_CONFIG", str(config))
    assert load_settings().stale_timeout == 600


def test_yaml_typo_gets_a_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text("stale_timout: 10m\n")
    with pytest.raises(ConfigError, match="did you mean 'stale_timeout'"):
        load_settings(config)


def test_yaml_bad_value_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "mirror.yaml"
    config.write_text("poll_interval: often\n")
    with pytest.raises(ConfigError, match="poll_interval"):
        load_settings(config)


def test_missing_config_file_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.yaml")


def test_require_names_the_missing_variable() -> None:
    settings = load_settings()
    with pytest.raises(ConfigError, match="MIRROR_DATABASE_URL is not set"):
        settings.require("database_url")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.5, "500ms"), (2.82397, "2.8s"), (10, "10s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m")],
)
def test_durations_print_short(seconds: float, text: str) -> None:
    from mirror.domain.durations import format_duration

    assert format_duration(seconds) == text


def test_thumbnails_are_on_every_10_s_unless_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from mirror.wiring import transcode_options

    defaults = load_settings()
    assert (defaults.thumbnails, defaults.thumbnail_interval) == (True, 10.0)
    assert transcode_options(defaults).thumbnail_interval_s == 10.0
    monkeypatch.setenv("MIRROR_THUMBNAIL_INTERVAL", "1m")
    assert transcode_options(load_settings()).thumbnail_interval_s == 60.0
    monkeypatch.setenv("MIRROR_THUMBNAILS", "false")
    assert transcode_options(load_settings()).thumbnail_interval_s is None
