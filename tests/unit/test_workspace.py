"""Work directories: exclusive per item, free-space check, orphan sweep."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mirror.domain.errors import InsufficientSpace, JobCancelled, PermanentError, TransientError
from mirror.files.workspace import Workspace, clean_up_orphans, resumable_here

ITEM = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def test_second_holder_gets_a_private_directory(tmp_path: Path) -> None:
    with Workspace.acquire(tmp_path, ITEM) as first:
        (first.path / "source.mkv").write_bytes(b"partial")
        with Workspace.acquire(tmp_path, ITEM) as second:
            assert first.path == tmp_path / ITEM
            assert second.path != first.path
            assert second.path.name.startswith(ITEM + "-")
        assert not second.path.exists()
        assert (first.path / "source.mkv").read_bytes() == b"partial"
    assert not first.path.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_new_attempt_finds_the_partial_file_of_a_dead_one(tmp_path: Path) -> None:
    leftover = tmp_path / ITEM
    leftover.mkdir()
    (leftover / "source.mkv").write_bytes(b"x" * 100)
    with Workspace.acquire(tmp_path, ITEM) as workspace:
        assert workspace.file("source.mkv").stat().st_size == 100


def test_a_new_attempt_starts_without_the_outputs_of_a_dead_one(tmp_path: Path) -> None:
    leftover = tmp_path / ITEM
    (leftover / "out" / "sub").mkdir(parents=True)
    (leftover / "out" / "video.mp4").write_bytes(b"the dead ffmpeg's half")
    (leftover / "stray.tmp").write_bytes(b"?")
    (leftover / "source.mkv").write_bytes(b"x" * 100)
    (leftover / "source.mkv.last-modified").write_text("Tue, 01 Dec 2026 10:00:00 GMT")
    with Workspace.acquire(tmp_path, ITEM) as workspace:
        source = workspace.resumable_file("source.mkv")
        workspace.discard_leftovers()
        # The download and its sidecar still resume; nothing else of the dead one is left.
        assert sorted(p.name for p in workspace.path.iterdir()) == [
            "source.mkv",
            "source.mkv.last-modified",
        ]
        assert source.stat().st_size == 100


def test_free_space_check_says_how_much_is_missing(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    with Workspace.acquire(tmp_path, ITEM) as workspace:
        workspace.require_space(1000, already_downloaded=0, reserve=0)
        with pytest.raises(InsufficientSpace) as caught:
            # download + outputs = 2x (free/2 + 1 %): over what is free, yet fits the disk;
            # the margin outlasts other processes freeing space meanwhile (was 2 bytes)
            workspace.require_space(free // 2 + free // 100, already_downloaded=0, reserve=0)
    message = str(caught.value)
    assert "need" in message and "have" in message and "missing" in message
    assert str(tmp_path) in message


def test_partial_download_counts_towards_free_space(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    size, reserve = int(free * 0.4), int(free * 0.3)  # 0.8 + 0.3 = 1.1x free from scratch
    with Workspace.acquire(tmp_path, ITEM) as workspace:
        with pytest.raises(InsufficientSpace):
            workspace.require_space(size, already_downloaded=0, reserve=reserve)
        workspace.require_space(size, already_downloaded=int(size * 0.5), reserve=reserve)


def test_an_item_larger_than_the_whole_disk_fails_for_good(tmp_path: Path) -> None:
    total = shutil.disk_usage(tmp_path).total
    with Workspace.acquire(tmp_path, ITEM) as workspace, pytest.raises(PermanentError) as caught:
        workspace.require_space(total, already_downloaded=0, reserve=0)
    message = str(caught.value)
    assert "can never fit" in message and "MIRROR_WORK_DIR" in message


def test_short_of_space_is_a_wait_for_disk_not_a_failure(tmp_path: Path) -> None:
    with Workspace.acquire(tmp_path, ITEM) as workspace, pytest.raises(InsufficientSpace) as caught:
        workspace.require_space(1000, already_downloaded=0, reserve=2**62)
    assert caught.value.phase == "waiting for disk"


def test_sweep_removes_unheld_directories_unless_kept(tmp_path: Path) -> None:
    other = "0123456789abcdef0123456789abcdef"
    (tmp_path / ITEM).mkdir()
    (tmp_path / other).mkdir()
    (tmp_path / f"{other}-deadbeef").mkdir()
    removed = clean_up_orphans(tmp_path, keep=lambda item: item == ITEM)
    assert sorted(p.name for p in removed) == sorted([other, f"{other}-deadbeef"])
    assert (tmp_path / ITEM).exists()  # a takeover may resume it


def test_sweep_leaves_held_directories_alone(tmp_path: Path) -> None:
    with Workspace.acquire(tmp_path, ITEM) as workspace:
        assert clean_up_orphans(tmp_path, keep=lambda item: False) == []
        assert workspace.path.exists()


def fail_inside(tmp_path: Path, error: Exception) -> Path:
    """An attempt that downloaded half a file and made an output, then raised `error`."""
    with pytest.raises(type(error)), Workspace.acquire(tmp_path, ITEM) as workspace:
        workspace.resumable_file("source.mkv").write_bytes(b"half")
        workspace.file("source.mkv.last-modified").write_text("Tue, 01 Oct 2024 10:00:00 GMT")
        (workspace.file("out") / "audio").mkdir(parents=True)
        (workspace.file("out") / "video.mp4").write_bytes(b"output")
        raise error
    return tmp_path / ITEM


def test_an_attempt_that_ends_transiently_keeps_only_its_partial_download(tmp_path: Path) -> None:
    path = fail_inside(tmp_path, TransientError("Jellyfin answered 503"))
    assert sorted(p.name for p in path.iterdir()) == ["source.mkv", "source.mkv.last-modified"]
    with Workspace.acquire(tmp_path, ITEM) as workspace:  # the next attempt resumes it
        assert workspace.resumable_file("source.mkv").read_bytes() == b"half"
    assert list(tmp_path.iterdir()) == []  # and, done, leaves nothing behind


@pytest.mark.parametrize("error", [PermanentError("corrupt"), JobCancelled("cancelled")])
def test_an_attempt_that_ends_the_job_removes_everything(tmp_path: Path, error: Exception) -> None:
    fail_inside(tmp_path, error)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("status", "worker_id", "kept"),
    [
        ("new", None, True),  # the next attempt may run here
        ("processing", "here:12:0", True),  # a takeover on this host resumes it
        ("processing", "there:12:0", False),  # another host runs it: useless here
        ("done", "here:12:0", False),
        ("failed", None, False),
        ("cancelled", "here:12:0", False),
    ],
)
def test_partial_downloads_are_kept_only_while_they_may_be_resumed_here(
    status: str, worker_id: str | None, kept: bool
) -> None:
    assert resumable_here(status, worker_id, "here") is kept
