"""The chart's worker container, run as Kubernetes would run it, mirrors an item.

Its command, args and environment (the ConfigMap, the Secret, the env the chart computes)
come from `helm template` output with the test stack's addresses as values; the process
gets that environment and nothing else of ours but PATH (the image's ENTRYPOINT is on
it). Then SIGTERM, as a scale-in sends it: the worker exits 0 well within the pod's
terminationGracePeriodSeconds.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia
from tests.deploy.chart import container_env, one, render, worker_container
from tests.fixtures.stack import Stack

pytestmark = pytest.mark.e2e


def test_the_rendered_worker_container_mirrors_a_job_and_stops_on_sigterm(
    stack: Stack, sample_h264_aac: SampleMedia, tmp_path: Path
) -> None:
    s3 = stack.s3
    manifests = render(
        **{
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
    )
    container = worker_container(manifests)
    pod = one(manifests, "Deployment", "-worker")["spec"]["template"]["spec"]
    env = container_env(manifests, container)
    assert not {name for name in env if not name.startswith("MIRROR_")}  # no GPU, no TZ
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # `mirror` as in the image
    env["HOME"] = str(tmp_path)

    item = stack.add_sample(sample_h264_aac)
    stack.enqueue(item)
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [*container["command"], *container["args"]],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        stack.wait_for(lambda: stack.job(item).status in ("done", "failed"), 120, "the job")
        job = stack.job(item)
        assert job.status == "done", (job.error, (tmp_path / "worker.log").read_text())
        assert job.video_key and job.video_key in stack.object_keys()

        stopped = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=pod["terminationGracePeriodSeconds"]) == 0
        assert time.monotonic() - stopped < 25  # idle: no grace to wait out
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=30)
        log.close()
