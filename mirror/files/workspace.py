"""Per-item work directories under `work_dir`: locking, free-space check, clean-up.

An attempt holds an exclusive flock on `<work_dir>/<item_id>.lock` while it uses
`<work_dir>/<item_id>/`. An attempt that ends for good (done, failed, cancelled)
removes the directory; one that ends transiently or is released keeps its partial
download, so the next attempt on this host resumes it. Directories nobody holds are
removed at worker start and between jobs unless their job may still resume here
(`resumable_here`), so a crash leaves no disk behind for long.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mirror.domain.durations import format_bytes
from mirror.domain.errors import InsufficientSpace, JobCancelled, PermanentError
from mirror.domain.jobs import Status

log = logging.getLogger("mirror.workspace")  # the name logs carried before the move to packages

# Outputs are at most about the size of the source (remux) and usually far smaller.
OUTPUT_FACTOR = 1.0


@dataclass
class Workspace:
    """A locked directory for one attempt of one item."""

    root: Path
    path: Path
    lock_path: Path
    _lock_fd: int | None = None
    _resumable: set[str] = field(default_factory=set)

    @classmethod
    def acquire(cls, root: Path, item_id: str) -> Workspace:
        """Lock the item's directory; if another process on this host holds it (an old
        attempt that lost its lease but still runs), use a private directory instead."""
        root.mkdir(parents=True, exist_ok=True)
        for name in (item_id, f"{item_id}-{uuid.uuid4().hex[:8]}"):
            lock_path = root / f"{name}.lock"
            fd = _lock(lock_path)
            if fd is None:
                log.warning("work directory %s is held by another process", root / name)
                continue
            path = root / name
            path.mkdir(exist_ok=True)
            return cls(root=root, path=path, lock_path=lock_path, _lock_fd=fd)
        raise AssertionError("a fresh private directory cannot be locked")

    def file(self, name: str) -> Path:
        return self.path / name

    def resumable_file(self, name: str) -> Path:
        """A file a later attempt may resume (the download): kept, with its sidecars
        (`<name>.*`), when this attempt ends without finishing the job."""
        self._resumable.add(name)
        return self.file(name)

    def discard_leftovers(self) -> None:
        """Remove all but the resumable files (declared first): what an attempt killed on
        this host left (kill -9 runs no clean-up) is then what a transient end keeps.
        Its outputs must not be read as this attempt's: an uploader following a dead
        ffmpeg's half-written file reads bytes the new one then overwrites (S3 refused
        such a part: BadDigest)."""
        self._keep_resumable_only()

    def require_space(self, source_size: int | None, already_downloaded: int, reserve: int) -> None:
        """Enough free disk for the rest of the download plus the outputs, or raise."""
        if source_size is None:
            return
        need = max(0, source_size - already_downloaded) + int(source_size * OUTPUT_FACTOR)
        need += reserve
        disk = shutil.disk_usage(self.path)
        whole = source_size + int(source_size * OUTPUT_FACTOR)
        if whole > disk.total:
            # Free space can never reach `need`: waiting for it would loop for ever.
            raise PermanentError(
                f"the item can never fit in {self.root}: it needs {format_bytes(whole)} "
                f"(the {format_bytes(source_size)} download plus its outputs) but that disk "
                f"holds {format_bytes(disk.total)} in all; point MIRROR_WORK_DIR at a bigger disk"
            )
        have = disk.free
        if have < need:
            raise InsufficientSpace(
                f"not enough free space in {self.root}: need {format_bytes(need)}, "
                f"have {format_bytes(have)}, missing {format_bytes(need - have)}"
            )

    def release(self, *, keep_resumable: bool = False) -> None:
        """Remove the directory (or, with `keep_resumable`, all but the resumable files)
        and drop the lock."""
        kept = self._keep_resumable_only() if keep_resumable else False
        if not kept:
            shutil.rmtree(self.path, ignore_errors=True)
        if self._lock_fd is not None:
            with contextlib.suppress(FileNotFoundError):
                self.lock_path.unlink()
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.release(keep_resumable=exc is not None and not _ends_for_good(exc))

    def _keep_resumable_only(self) -> bool:
        """Delete everything but the resumable files; True if any of them is left."""
        kept = False
        for entry in list(self.path.iterdir()) if self.path.is_dir() else []:
            if any(entry.name == n or entry.name.startswith(n + ".") for n in self._resumable):
                kept = kept or entry.is_file()
            elif entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        return kept


def _ends_for_good(error: BaseException) -> bool:
    """Whether the job ends with this error, so nothing will resume its download."""
    return isinstance(error, PermanentError | JobCancelled)


def resumable_here(status: str, worker_id: str | None, host: str) -> bool:
    """Whether an item directory may still serve its job on `host`: the job waits in the
    queue (the next attempt may run here), or an attempt on this host holds it."""
    if status == Status.NEW:
        return True
    return status == Status.PROCESSING and (worker_id or "").split(":", 1)[0] == host


def clean_up_orphans(root: Path, keep: Callable[[str], bool]) -> list[Path]:
    """Remove item directories nobody holds, unless `keep(item_id)`; return them."""
    if not root.is_dir():
        return []
    removed: list[Path] = []
    for path in sorted(root.iterdir()):
        if not path.is_dir():
            continue
        item_id = path.name.split("-", 1)[0]
        lock_path = root / f"{path.name}.lock"
        fd = _lock(lock_path)
        if fd is None:
            continue  # an attempt is using it right now
        try:
            # A private directory (`<item>-<suffix>`) is never resumed; the plain one is
            # kept while its job may still resume it here.
            if path.name != item_id or not keep(item_id):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
                with contextlib.suppress(FileNotFoundError):
                    lock_path.unlink()
        finally:
            os.close(fd)
    return removed


def _lock(lock_path: Path) -> int | None:
    """An exclusive flock on `lock_path`, or None if another process holds it.

    Holders unlink the lock file when they finish; the inode check makes sure we did not
    lock a file that was unlinked between our open and our flock.
    """
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
