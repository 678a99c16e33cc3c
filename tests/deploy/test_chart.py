"""The Helm chart (deploy/helm/mirror) renders, lints and validates offline.

Every manifest of three renderings (the default values, tests/deploy/values-everything.yaml
with every optional part on, and the ScaledJob variant) is checked against Kubernetes'
own JSON schemas (the `kubernetes-validate` package, strict: unknown fields are errors)
and the KEDA objects against the schemas of KEDA's CRDs (vendored in keda_schema/). The
rest checks the chart against the code: settings, commands, the shutdown grace.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer.main

from mirror.cli.commands import app
from mirror.domain.durations import parse_duration
from mirror.runner.worker import WorkerConfig
from mirror.settings import Settings, env_var
from tests.deploy.chart import (
    CHART,
    EVERYTHING,
    HERE,
    Manifest,
    container_env,
    load_yaml,
    one,
    render,
    render_error,
    run_helm,
    worker_container,
)

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is in the dev extra"
)

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest the
# schemas know: a field either one lacks is an error.
KUBERNETES_VERSIONS = ("1.25", kubernetes_validate.latest_version())
SETTINGS_VARS = {env_var(name): name for name in Settings.model_fields}
SECRET_SETTINGS = {
    env_var(name)
    for name, info in Settings.model_fields.items()
    if "SecretStr" in str(info.annotation)
} | {"MIRROR_DATABASE_URL"}  # holds the database password
# How long the worker waits, after the grace, for aborted attempts before it releases
# their jobs itself (mirror/runner/worker.py).
ABORT_WAIT = {f.name: f.default for f in dataclasses.fields(WorkerConfig)}["abort_wait"]
SCALED_JOB = {"keda.scaledJob.enabled": True, "secrets.values.MIRROR_DATABASE_URL": "x"}


# kubernetes-validate reads its JSON schema files (megabytes) again on every call.
_schema_contents = functools.cache(kubernetes_validate.utils.schema_contents)


@pytest.fixture(autouse=True)
def _read_each_schema_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubernetes_validate.utils, "schema_contents", _schema_contents)


def renderings() -> dict[str, list[Manifest]]:
    return {
        "default": render(),
        "everything": render(EVERYTHING),
        "scaled job": render(**SCALED_JOB),
    }


def pod_specs(manifests: list[Manifest]) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for m in manifests:
        name = f"{m['kind']} {m['metadata']['name']}"
        if m["kind"] in ("Deployment", "Job"):
            specs.append((name, m["spec"]["template"]["spec"]))
        elif m["kind"] == "ScaledJob":
            specs.append((name, m["spec"]["jobTargetRef"]["template"]["spec"]))
    return specs


@functools.cache
def keda_schema(kind: str) -> dict[str, Any]:
    """The CRD's openAPIV3Schema, made strict as Kubernetes' own (see keda_schema/README)."""
    schema: dict[str, Any] = json.loads(
        (HERE / "keda_schema" / f"{kind.lower()}-keda-v1alpha1.json").read_text()
    )
    return _strict(schema)


def _strict(node: Any) -> Any:
    """Unknown fields are errors where the CRD lists the fields (the API server prunes
    them silently: a typo would vanish instead of failing)."""
    if isinstance(node, dict):
        node = {key: _strict(value) for key, value in node.items()}
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
    elif isinstance(node, list):
        node = [_strict(value) for value in node]
    return node


def validate(manifest: Manifest) -> None:
    if manifest["apiVersion"] == "keda.sh/v1alpha1":
        jsonschema.Draft7Validator(keda_schema(manifest["kind"])).validate(manifest)
        return
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(manifest, version, strict=True)


@pytest.mark.parametrize(
    "values",
    [[], ["--values", str(EVERYTHING)], ["--set", "keda.scaledJob.enabled=true"]],
    ids=["default", "everything", "scaled job"],
)
def test_helm_lint_is_clean(values: list[str]) -> None:
    done = run_helm("lint", "--strict", str(CHART), *values)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_every_rendered_manifest_is_valid_by_the_kubernetes_and_keda_schemas() -> None:
    kinds = set()
    for name, manifests in renderings().items():
        for manifest in manifests:
            kinds.add(manifest["kind"])
            try:
                validate(manifest)
            except Exception as error:  # the validators' errors name the path
                raise AssertionError(f"{name}: {manifest['kind']}: {error}") from error
    assert kinds == {
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Deployment",
        "Service",
        "Ingress",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "Job",
        "ScaledObject",
        "ScaledJob",
        "TriggerAuthentication",
    }


def test_the_validation_would_catch_a_misspelt_field() -> None:
    deployment = one(render(), "Deployment", "-worker")
    pod = deployment["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"]["readOnlyRootFilesytem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    scaled = one(render(EVERYTHING), "ScaledObject")
    scaled["spec"]["cooldownPeriods"] = 300
    with pytest.raises(jsonschema.ValidationError):
        validate(scaled)


@pytest.mark.parametrize("grace", ["30s", "2m", "45", "500ms", "1h"])
def test_the_termination_grace_outlasts_the_shutdown_grace_and_the_release(grace: str) -> None:
    """SIGKILL only after MIRROR_SHUTDOWN_GRACE and the worker's own release of an attempt
    that ignores the abort (WorkerConfig.abort_wait), with a margin for the release."""
    deployment = render(**{"worker.shutdownGrace": grace})
    scaled_job = render(**SCALED_JOB, **{"worker.shutdownGrace": grace})
    for manifests in (deployment, scaled_job):
        (spec,) = [spec for name, spec in pod_specs(manifests) if name.endswith("-worker")]
        env = container_env(manifests, spec["containers"][0])
        assert env["MIRROR_SHUTDOWN_GRACE"] == grace
        seconds = parse_duration(env["MIRROR_SHUTDOWN_GRACE"])
        margin = spec["terminationGracePeriodSeconds"] - seconds - ABORT_WAIT
        assert margin >= 15, f"{grace}: a margin of {margin} s"


def test_the_default_grace_matches_the_settings_and_compose() -> None:
    manifests = render()
    spec = one(manifests, "Deployment", "-worker")["spec"]["template"]["spec"]
    env = container_env(manifests, spec["containers"][0])
    assert parse_duration(env["MIRROR_SHUTDOWN_GRACE"]) == Settings().shutdown_grace
    assert spec["terminationGracePeriodSeconds"] == 60  # compose's stop_grace_period


def test_the_chart_refuses_values_that_would_bypass_it() -> None:
    assert "worker.shutdownGrace" in render_error(**{"config.MIRROR_SHUTDOWN_GRACE": "10m"})
    assert "is a secret" in render_error(**{"config.MIRROR_JELLYFIN_API_KEY": "k"})
    assert "not a duration" in render_error(**{"worker.shutdownGrace": "soon"})
    # values.schema.json: a misspelt or mistyped value stops helm, as a misspelt
    # setting stops mirror.
    assert "concurency is not allowed" in render_error(**{"worker.concurency": 2})
    assert "^MIRROR_" in render_error(**{"config.JELLYFIN_URL": "http://j"})
    assert "keda.enabled" in render_error(**{"keda.enabled": "yes"})
    assert "choose one" in render_error(**{"keda.enabled": True, "keda.scaledJob.enabled": True})


def test_every_setting_the_chart_names_is_a_mirror_setting() -> None:
    values = load_yaml(CHART / "values.yaml")
    text = (CHART / "values.yaml").read_text()
    named = set(values["config"]) | set(re.findall(r"^\s*# (MIRROR_[A-Z0-9_]+):", text, re.M))
    named |= set(values["secrets"]["values"])
    for manifests in renderings().values():
        for _, spec in pod_specs(manifests):
            for container in spec["containers"]:
                named |= {e["name"] for e in container.get("env", [])}
    named = {name for name in named if name.startswith("MIRROR_")}
    unknown = sorted(named - set(SETTINGS_VARS))
    assert unknown == []
    assert set(values["secrets"]["values"]) == SECRET_SETTINGS | {"MIRROR_S3_ACCESS_KEY_ID"}


def test_secrets_stay_out_of_the_configmap_and_reach_every_container() -> None:
    manifests = render(
        **{"secrets.values.MIRROR_DATABASE_URL": "postgresql+psycopg://u:pw@db/m"},
        **{"secrets.values.MIRROR_JELLYFIN_API_KEY": "jellyfin-key-1234"},
    )
    configmap = one(manifests, "ConfigMap")
    assert not set(configmap["data"]) & SECRET_SETTINGS
    for name, spec in pod_specs(manifests):
        env = container_env(manifests, spec["containers"][0])
        if name.endswith("-migrate"):
            assert env["MIRROR_DATABASE_URL"] == "postgresql+psycopg://u:pw@db/m"
            continue
        assert env["MIRROR_JELLYFIN_API_KEY"] == "jellyfin-key-1234", name
        assert env["MIRROR_JELLYFIN_URL"] == "http://jellyfin:8096", name


def test_every_container_is_non_root_read_only_and_without_capabilities() -> None:
    uid = re.search(r"useradd .*--uid (\d+) mirror", (CHART.parents[2] / "Dockerfile").read_text())
    assert uid is not None
    for rendering, manifests in renderings().items():
        for name, spec in pod_specs(manifests):
            where = f"{rendering}: {name}"
            assert spec["securityContext"]["runAsNonRoot"] is True, where
            assert spec["securityContext"]["runAsUser"] == int(uid[1]), where  # the image's
            assert spec["automountServiceAccountToken"] is False, where
            for container in spec["containers"]:
                context = container["securityContext"]
                assert context["readOnlyRootFilesystem"] is True, where
                assert context["allowPrivilegeEscalation"] is False, where
                assert context["capabilities"]["drop"] == ["ALL"], where
                mounts = {m["mountPath"] for m in container["volumeMounts"]}
                assert "/tmp" in mounts, where
                work_dir = container_env(manifests, container).get("MIRROR_WORK_DIR")
                assert work_dir is None or work_dir in mounts, where


def test_every_container_command_exists_in_the_cli() -> None:
    argvs = []
    for manifests in renderings().values():
        for _, spec in pod_specs(manifests):
            for container in spec["containers"]:
                assert container["command"] == ["mirror"]
                argvs.append([str(arg) for arg in container["args"]])
    assert ["worker"] in argvs and ["worker", "--burst"] in argvs and ["db", "upgrade"] in argvs
    for argv in argvs:
        command: Any = typer.main.get_command(app)
        args = list(argv)
        while hasattr(command, "commands") and args and args[0] in command.commands:
            command = command.commands[args.pop(0)]
        assert not hasattr(command, "commands"), f"`mirror {' '.join(argv)}` is no command"
        command.make_context(" ".join(["mirror", *argv]), args)  # raises on unknown options


def test_the_migration_is_a_hook_before_install_and_upgrade_with_its_own_secret() -> None:
    manifests = render(**{"secrets.values.MIRROR_DATABASE_URL": "postgresql://u:pw@db/m"})
    job = one(manifests, "Job", "-migrate")
    hook_secret = one(manifests, "Secret", "-migrate")
    for hooked in (job, hook_secret):
        annotations = hooked["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
        assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]
    weight = int(hook_secret["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert weight < int(job["metadata"]["annotations"]["helm.sh/hook-weight"])
    # With an existing Secret (everything): no hook Secret, Postgres' own URL by its key.
    everything = render(EVERYTHING)
    assert [m for m in everything if m["kind"] == "Secret"] == []
    ref = one(everything, "Job")["spec"]["template"]["spec"]["containers"][0]["env"][0]
    assert ref["valueFrom"]["secretKeyRef"] == {
        "name": "mirror-secrets",
        "key": "POSTGRES_DIRECT_URL",
    }


def test_gpus_and_the_video_encoder_reach_the_worker() -> None:
    manifests = render(EVERYTHING)
    pod = one(manifests, "Deployment", "-worker")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = container_env(manifests, container)
    assert env["MIRROR_VIDEO_ENCODER"] == "h264_nvenc"
    assert "video" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")  # NVENC
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["limits"]["gpu.intel.com/i915"] == 1
    assert {"name": "dri", "mountPath": "/dev/dri"} in container["volumeMounts"]
    assert pod["securityContext"]["supplementalGroups"] == [44, 993]
    assert pod["runtimeClassName"] == "nvidia"
    default = worker_container(render())
    assert "nvidia.com/gpu" not in default["resources"].get("limits", {})
    assert "MIRROR_VIDEO_ENCODER" not in container_env(render(), default)


@pytest.mark.parametrize("kind", ["emptyDir", "ephemeral", "persistentVolumeClaim"])
def test_the_work_directory_is_sized_from_the_values(kind: str) -> None:
    manifests = render(**{"worker.workDir.type": kind, "worker.workDir.size": "64Gi"})
    pod = one(manifests, "Deployment", "-worker")["spec"]["template"]["spec"]
    (work,) = [v for v in pod["volumes"] if v["name"] == "work"]
    if kind == "emptyDir":
        assert work["emptyDir"] == {"sizeLimit": "64Gi"}
        # The scheduler places the pod on a node with that much room.
        requests = pod["containers"][0]["resources"]["requests"]
        assert requests["ephemeral-storage"] == "64Gi"
    elif kind == "ephemeral":
        claim = work["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert claim["resources"]["requests"]["storage"] == "64Gi"
    else:
        claim = one(manifests, "PersistentVolumeClaim")
        assert work["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    validate(one(manifests, "Deployment", "-worker"))


def test_keda_scales_the_worker_deployment_from_zero_with_the_secret() -> None:
    url = "postgresql+psycopg://mirror:pw@db:5432/mirror"
    manifests = render(**{"keda.enabled": True, "secrets.values.MIRROR_DATABASE_URL": url})
    scaled = one(manifests, "ScaledObject")
    deployment = one(manifests, "Deployment", "-worker")
    assert "replicas" not in deployment["spec"]  # KEDA's HPA owns the count
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert scaled["spec"]["minReplicaCount"] == 0
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "postgresql"
    auth = one(manifests, "TriggerAuthentication")
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    (ref,) = auth["spec"]["secretTargetRef"]
    secret = one(manifests, "Secret", "-mirror")
    assert ref["parameter"] == "connection" and ref["name"] == secret["metadata"]["name"]
    # pgx reads libpq URLs: SQLAlchemy's driver suffix is dropped for KEDA only.
    assert secret["stringData"][ref["key"]] == "postgresql://mirror:pw@db:5432/mirror"
    assert secret["stringData"]["MIRROR_DATABASE_URL"] == url
    assert [m for m in manifests if m["kind"] == "PodDisruptionBudget"]


def test_the_scaled_job_variant_replaces_the_deployment_with_burst_workers() -> None:
    manifests = render(**SCALED_JOB)
    assert not [m for m in manifests if m["kind"] == "Deployment" and "-worker" in str(m)]
    scaled = one(manifests, "ScaledJob")
    spec = scaled["spec"]["jobTargetRef"]["template"]["spec"]
    assert spec["containers"][0]["args"] == ["worker", "--burst"]
    assert spec["restartPolicy"] == "Never"
    assert scaled["spec"]["scalingStrategy"]["strategy"] == "accurate"


def test_the_readme_of_the_keda_schema_names_its_source() -> None:
    readme = (Path(HERE) / "keda_schema" / "README.md").read_text()
    assert re.search(r"\b[0-9a-f]{40}\b", readme)


def test_the_readme_shows_the_query_the_chart_renders() -> None:
    readme = (CHART.parents[2] / "README.md").read_text()
    section = readme.split("\n## Running a fleet\n", 1)[1].split("\n## ", 1)[0]
    (shown,) = re.findall(r"```sql\n(.*?)```", section, re.DOTALL)
    (trigger,) = one(render(**{"keda.enabled": True}), "ScaledObject")["spec"]["triggers"]

    def squeeze(sql: str) -> str:
        return re.sub(r"\s+", " ", sql).replace("( ", "(").replace(" )", ")").strip()

    assert squeeze(shown.replace("<worker.concurrency>", "1")) == squeeze(
        trigger["metadata"]["query"]
    )


def test_numbers_in_the_values_reach_the_environment_as_written() -> None:
    """Helm reads YAML numbers as floats: 1000000000 must not become 1e+09."""
    data = one(render(EVERYTHING), "ConfigMap")["data"]
    assert data["MIRROR_FREE_SPACE_RESERVE"] == "1000000000"
    assert data["MIRROR_JELLYFIN_MAX_DOWNLOADS"] == "4"
