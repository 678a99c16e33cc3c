"""The chart's worker containers, run as Kubernetes would run them, mirror items.

Their command, args and environment (the ConfigMap, the Secret, the env the chart
computes) come from `helm template` output with the test stack's addresses as values;
the process gets that environment and nothing else of ours but PATH (the image's
ENTRYPOINT is on it). The Deployment's worker mirrors an item, then SIGTERM, as a
scale-in sends it: exit 0 well within the pod's terminationGracePeriodSeconds. The
ScaledJob's (`--burst`) mirrors the next one and exits 0 by itself, so its Job completes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mirror.demo.media import SampleMedia
from tests.deploy.chart import Manifest, container_env, one, render
from tests.fixtures.stack import Stack

pytestmark = pytest.mark.e2e


def stack_values(stack: Stack) -> dict[str, Any]:
    s3 = stack.s3
    return {
        "config.MIRROR_JELLYFIN_URL": stack.jellyfin.url,
        "config.MIRROR_S3_BUCKET": s3.bucket,
        "config.MIRROR_S3_ENDPOINT_URL": s3.endpoint_url,
        "config.MIRROR_S3_REGION": s3.region,
        "config.MIRROR_S3_PREFIX": "mirror",
        "config.MIRROR_POLL_INTERVAL": "200ms",
        "secrets.values.MIRROR_DATABASE_URL": stack.database_url,
        "secrets.values.MIRROR_JELLYFIN_API_KEY": stack.jellyfin.api_key,
        "secrets.values.MIRROR_S3_ACCESS_KEY_ID": s3.access_key_id,
        "secrets.values.MIRROR_S3_SECRET_ACCESS_KEY": s3.secret_access_key,
        "worker.workDir.mountPath": str(stack.work_dir),
    }


def start(manifests: list[Manifest], pod: dict[str, Any], folder: Path) -> subprocess.Popen[bytes]:
    """The pod's container as a process, with the environment Kubernetes would give it."""
    (container,) = pod["containers"]
    env = container_env(manifests, container)
    assert not {name for name in env if not name.startswith("MIRROR_")}  # no GPU, no TZ
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # `mirror` as in the image
    env["HOME"] = str(folder)
    with (folder / "worker.log").open("w") as log:
        return subprocess.Popen(
            [*container["command"], *container["args"]],
            env=env,
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def queue(stack: Stack, sample: SampleMedia, name: str) -> str:
    item = stack.add_sample(sample, name=name)
    stack.enqueue(item)
    return item


def wait_until_mirrored(stack: Stack, item: str, folder: Path) -> None:
    stack.wait_for(lambda: stack.job(item).status in ("done", "failed"), 120, "the job")
    job = stack.job(item)
    assert job.status == "done", (job.error, (folder / "worker.log").read_text())
    assert job.video_key and job.video_key in stack.object_keys()


def test_the_rendered_worker_containers_mirror_jobs_and_stop_as_kubernetes_expects(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    manifests = render(**stack_values(stack))
    pod = one(manifests, "Deployment", "-worker")["spec"]["template"]["spec"]
    (tmp_path / "deployment").mkdir()
    worker = start(manifests, pod, tmp_path / "deployment")
    try:
        item = queue(stack, sample_h264_aac, "Deployment")
        wait_until_mirrored(stack, item, tmp_path / "deployment")
        stopped = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=pod["terminationGracePeriodSeconds"]) == 0
        assert time.monotonic() - stopped < 25  # idle: no grace to wait out
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)

    manifests = render(**stack_values(stack), **{"keda.scaledJob.enabled": True})
    pod = one(manifests, "ScaledJob")["spec"]["jobTargetRef"]["template"]["spec"]
    (tmp_path / "job").mkdir()
    item = queue(stack, sample_h264_aac, "ScaledJob")  # KEDA starts a Job for due work
    burst = start(manifests, pod, tmp_path / "job")
    try:
        wait_until_mirrored(stack, item, tmp_path / "job")
        assert burst.wait(timeout=60) == 0  # nothing left to claim: the Job completes
    finally:
        if burst.poll() is None:
            burst.kill()
            burst.wait(timeout=30)
