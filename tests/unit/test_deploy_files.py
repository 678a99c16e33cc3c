"""The deployment files agree with the code: docker-compose.yml, .env.example, Dockerfile.

There is no Docker where the tests run, so these files are never built here; instead
every name they use is checked against what it refers to: MIRROR_* variables against
Settings, `mirror ...` commands against the CLI (parsed with its real options),
depends_on targets against services, interpolated ${VARS} against .env.example.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer.main
import yaml

from mirror.cli.commands import app
from mirror.domain.durations import parse_duration
from mirror.settings import Settings, env_var, load_settings

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = re.compile(r"^(?P<commented>#\s*)?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")
EXPRESSION = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?])?(?P<rest>.*)", re.DOTALL)
INTERPOLATED = re.compile(r"(?<!\$)\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)")
SETTINGS_VARS = {env_var(name): name for name in Settings.model_fields}
# Documented with a value that is not the code's default (the image sets /work; the
# reaper's default is computed from the stale timeout).
DEFAULT_DIFFERS = {"work_dir", "reap_interval"}


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def services() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose()["services"]
    return found


def env_example() -> list[tuple[str, str, bool]]:
    """(name, value, commented) for each `NAME=value` or `# NAME=value` line."""
    found = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = ASSIGNMENT.match(line)
        if match:
            found.append((match["name"], match["value"], bool(match["commented"])))
    return found


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def mirror_services() -> dict[str, dict[str, Any]]:
    """Services that run `mirror` from its image (built from this Dockerfile)."""
    return {
        name: svc
        for name, svc in services().items()
        if svc.get("build") == "." and "entrypoint" not in svc
    }


def interpolate(text: str, values: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error}, nested, for the tests' values."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        elif text.startswith("${", i):
            depth, j = 1, i + 2
            while depth:
                if text.startswith("${", j):
                    depth, j = depth + 1, j + 2
                else:
                    depth -= text[j] == "}"
                    j += 1
            parts = EXPRESSION.fullmatch(text[i + 2 : j - 1])
            assert parts, f"not an expression compose knows: {text[i:j]}"
            value = values.get(parts["name"], "")
            if parts["op"] in (":-", "-") and not value:
                value = interpolate(parts["rest"], values)
            elif parts["op"] in (":?", "?") and not value:
                raise AssertionError(f"compose would stop: {interpolate(parts['rest'], values)}")
            out.append(value)
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def test_every_mirror_variable_used_exists_in_settings() -> None:
    used = {name for name, _, _ in env_example() if name.startswith("MIRROR_")}
    for service in services().values():
        used |= {name for name in environment_of(service) if name.startswith("MIRROR_")}
    dockerfile = (ROOT / "Dockerfile").read_text()
    used |= set(re.findall(r"\b(MIRROR_[A-Z0-9_]+)=", dockerfile))
    unknown = sorted(used - set(SETTINGS_VARS))
    assert unknown == [], f"not settings of mirror/settings.py: {unknown}"


def test_env_example_lists_every_setting_once_with_a_comment() -> None:
    names = [name for name, _, _ in env_example()]
    assert len(names) == len(set(names)), "a variable is listed twice"
    missing = sorted(set(SETTINGS_VARS) - set(names))
    assert missing == [], f".env.example lacks {missing}"
    lines = (ROOT / ".env.example").read_text().splitlines()
    for number, line in enumerate(lines):
        if ASSIGNMENT.match(line):
            above = lines[number - 1]
            assert above.startswith("#") and not ASSIGNMENT.match(above), (
                f"{line!r} has no one-line comment above it"
            )


def test_env_example_loads_through_load_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """All of it: the required placeholders, the commented defaults, and compose's wiring."""
    example = env_example()
    _clear_mirror_env(monkeypatch)
    values = {name: value for name, value, commented in example if not commented}
    for name, value, _ in example:
        monkeypatch.setenv(name, value)
    for name, raw in environment_of(services()["worker"]).items():
        monkeypatch.setenv(name, interpolate(raw, values))
    settings = load_settings()
    assert settings.database_url == (
        f"postgresql+psycopg://mirror:{values['POSTGRES_PASSWORD']}@postgres:5432/mirror"
    )
    assert settings.s3_endpoint_url == "http://seaweedfs:8333"
    assert settings.s3_access_key_id is not None
    assert settings.s3_access_key_id.get_secret_value() == values["SEAWEEDFS_ACCESS_KEY"]


def test_commented_values_in_env_example_are_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _clear_mirror_env(monkeypatch)
    defaults = load_settings()
    for name, value, commented in env_example():
        field = SETTINGS_VARS.get(name)
        if not commented or field is None or field in DEFAULT_DIFFERS:
            continue
        if Settings.model_fields[field].default is None:
            continue  # an example value, not a default
        monkeypatch.setenv(name, value)
        documented = getattr(load_settings(), field)
        monkeypatch.delenv(name)
        assert documented == getattr(defaults, field), f"{name}={value} is not the default"


def test_compose_interpolates_only_variables_of_env_example() -> None:
    listed = {name for name, _, _ in env_example()}
    text = (ROOT / "docker-compose.yml").read_text()
    used = {match["name"] for match in INTERPOLATED.finditer(text)}
    assert used - listed == set()


def test_depends_on_targets_exist_and_wait_for_the_right_state() -> None:
    all_services = services()
    for name, service in all_services.items():
        depends = service.get("depends_on") or {}
        for target in depends:
            assert target in all_services, f"{name} depends on unknown service {target}"
            if isinstance(depends, dict):
                condition = depends[target]["condition"]
                if condition == "service_healthy":
                    assert "healthcheck" in all_services[target], f"{target} has no healthcheck"
                if condition == "service_completed_successfully":
                    assert all_services[target].get("restart") == "no", f"{target} restarts"
    worker = all_services["worker"]
    assert set(worker["depends_on"]) >= {"migrate", "bucketrules"}
    assert "postgres" in all_services["migrate"]["depends_on"]


def test_the_worker_scales_and_stops_gracefully() -> None:
    worker = services()["worker"]
    assert "container_name" not in worker and "ports" not in worker
    grace = Settings().shutdown_grace
    for name, value, commented in env_example():
        if name == "MIRROR_SHUTDOWN_GRACE" and not commented:
            grace = parse_duration(value)
    assert parse_duration(worker["stop_grace_period"]) > grace


def test_compose_is_valid_by_the_compose_spec_schema() -> None:
    """The schema `docker compose` itself checks against (vendored, see its README)."""
    schema = json.loads((ROOT / "tests/unit/compose_spec/compose-spec.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    errors = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in jsonschema.Draft7Validator(schema).iter_errors(compose())
    ]
    assert errors == []


def test_every_image_is_pinned_and_none_is_minio() -> None:
    """`docker compose up` pulls only images that exist, at a tag chosen here: MinIO's
    `minio/minio` and `minio/mc` repositories were deleted from Docker Hub (2026-09)."""
    for name, service in services().items():
        image = service.get("image")
        if service.get("build") == "." or image is None:
            continue
        repository, _, tag = image.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: {image} is not pinned"
        assert not repository.startswith("minio/"), f"{name}: {image} no longer exists"
    assert services()["seaweedfs"]["image"] == "chrislusf/seaweedfs:4.48"


def test_seaweedfs_makes_the_bucket_and_bucketrules_set_cors_and_lifecycle() -> None:
    all_services = services()
    seaweedfs = all_services["seaweedfs"]
    assert seaweedfs["command"][0] == "mini"
    env = environment_of(seaweedfs)
    assert env["S3_BUCKET"].startswith("${MIRROR_S3_BUCKET")  # `weed mini` makes it
    assert "-s3.autoCreateBucket=false" in seaweedfs["command"]
    assert "$$S3_BUCKET" in " ".join(seaweedfs["healthcheck"]["test"])  # healthy: bucket made
    assert "8333:8333" in seaweedfs["ports"]
    script = "\n".join(all_services["bucketrules"]["command"])
    compile(script, "bucketrules", "exec")  # the one-shot's Python parses
    assert "put_bucket_cors" in script and "Content-Range" in script
    assert "AbortIncompleteMultipartUpload" in script
    assert all_services["bucketrules"]["depends_on"]["seaweedfs"]["condition"] == (
        "service_healthy"
    )


def test_serve_tells_browsers_where_s3_is() -> None:
    env = environment_of(services()["serve"])
    assert interpolate(env["MIRROR_S3_PUBLIC_URL"], {}) == "http://localhost:8333"


def mirror_argvs() -> list[tuple[str, list[str]]]:
    """Every `mirror ...` command line the deployment files and the README run."""
    argvs: list[tuple[str, list[str]]] = []
    for name, service in mirror_services().items():
        argvs.append((f"compose {name}", [str(arg) for arg in service["command"]]))
    dockerfile = (ROOT / "Dockerfile").read_text()
    entrypoint = re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.MULTILINE)
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)
    assert entrypoint and json.loads(entrypoint[1]) == ["mirror"]
    assert cmd
    argvs.append(("Dockerfile CMD", json.loads(cmd[1])))
    readme = (ROOT / "README.md").read_text()
    for match in re.finditer(r"docker compose run --rm worker ([^\n`#]+)", readme):
        argvs.append(("README", match[1].split()))
    return argvs


@pytest.mark.parametrize(("where", "argv"), mirror_argvs())
def test_every_mirror_command_exists_with_its_options(where: str, argv: list[str]) -> None:
    # typer vendors its own click: walk groups by their `commands`, not by click types.
    command: Any = typer.main.get_command(app)
    args = list(argv)
    while hasattr(command, "commands") and args and args[0] in command.commands:
        command = command.commands[args.pop(0)]
    assert not hasattr(command, "commands"), f"{where}: `mirror {' '.join(argv)}` is no command"
    command.make_context(" ".join(["mirror", *argv]), args)  # raises on unknown options


def test_the_image_runs_as_mirror_with_the_migrations_beside_the_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER mirror$", dockerfile, re.MULTILINE)
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile, re.MULTILINE)
    assert "apt-get install -y --no-install-recommends ffmpeg" in dockerfile
    # mirror/db/migrations.py looks for alembic.ini at Path(__file__).parents[2].
    assert "pip install -e ." in dockerfile
    for path in ("alembic.ini", "alembic", "mirror", "pyproject.toml", "README.md"):
        assert re.search(rf"^COPY .*\b{re.escape(path)}\b", dockerfile, re.MULTILINE), path
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert not {"alembic", "alembic.ini", "mirror"} & set(ignored)
    assert ".env" in ignored  # secrets stay out of the build context


def _clear_mirror_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MIRROR_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "override", ["docker-compose.gpu-dri.yml", "docker-compose.gpu-nvidia.yml"]
)
def test_gpu_overrides_extend_the_worker_service(override: str) -> None:
    """README: Hardware encoders. Each override only adds to compose's own worker: the
    device (/dev/dri, or an NVIDIA reservation with the video capability NVENC needs)."""
    text = (ROOT / override).read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    assert set(data["services"]) == {"worker"}
    assert "worker" in services()
    worker = data["services"]["worker"]
    assert "image" not in worker and "command" not in worker  # compose's worker, extended
    if override.endswith("dri.yml"):
        assert worker["devices"] == ["/dev/dri:/dev/dri"]
        assert worker["group_add"]
        assert "GPU_PACKAGES" in worker["build"]["args"]
        assert "ARG GPU_PACKAGES" in (ROOT / "Dockerfile").read_text()
    else:
        (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and "video" in device["capabilities"]
        assert "video" in worker["environment"]["NVIDIA_DRIVER_CAPABILITIES"]
    listed = {name for name, _, _ in env_example()}
    assert {match["name"] for match in INTERPOLATED.finditer(text)} <= listed
    schema = json.loads((ROOT / "tests/unit/compose_spec/compose-spec.json").read_text())
    assert [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(data)] == []
    assert f"-f {override}" in (ROOT / "README.md").read_text()
