"""The servers `mirror demo` brings along: moto's S3 and an embedded Postgres.

Each is a context manager that stops what it started and removes what it wrote, so the
demo can stack them and unwind on success, error or Ctrl-C alike.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from mirror.errors import MirrorError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DUMMY_KEY = "demo"
REGION = "us-east-1"


class DemoFailed(MirrorError):
    """A step of the demo went wrong; the message names the step (exit 1)."""


@contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 server in a thread of this process, on a port the OS picks."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        raise DemoFailed(
            "moto is not installed: pip install 'mirror[demo]' (or make demo)"
        ) from None
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        wsgi = getattr(server, "_server", None)  # stop() leaves the listening socket open
        if wsgi is not None:
            wsgi.server_close()


def s3_client(endpoint: str) -> S3Client:
    """A client for the demo's own moto server; moto accepts any credentials."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=DUMMY_KEY,
        aws_secret_access_key=DUMMY_KEY,
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
