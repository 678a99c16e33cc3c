"""Real ffmpeg runs on generated media: outputs, progress, abort, failures, no orphans."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia, corrupt_copy, describe_streams
from mirror.domain.errors import JobCancelled, LeaseLost, PermanentError, TransientError
from mirror.domain.progress import AbortSignal, Progress
from mirror.transcode import TranscodePlan, plan_transcode, run_transcode
from mirror.transcode.process import StderrTail, spawn

ITEM_ID = "a3f4c2e1b5d64e0f9c8b7a6d5e4f3a21"


def slow_plan(sample: SampleMedia, work_dir: Path) -> TranscodePlan:
    """For `sample_slow` (20 s) read at half speed (`slow_ffmpeg`): the encode runs for
    40 s, so aborts land mid-run."""
    return plan_transcode(
        sample.to_item(ITEM_ID),
        work_dir,
        sample.path,
        video_codec="libx264",
        x264_preset="ultrafast",
    )


@pytest.fixture
def slow_ffmpeg(paced_ffmpeg: Callable[[float], str]) -> str:
    """The ffmpeg to run `slow_plan` with: the real one, its input read at half speed
    (tests/fixtures/media.py), so the encode lasts without keeping a core busy."""
    return paced_ffmpeg(0.5)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone (reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # comm may contain spaces
    return fields[0], int(fields[1])


def ffmpeg_children(parent: int, ffmpeg_path: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = proc_stat(int(entry.name))
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if stat is not None and stat[1] == parent and argv0 == ffmpeg_path:
            found.append(int(entry.name))
    return found


def is_alive(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def test_fitting_codecs_are_remuxed_into_one_stream_per_file(
    sample_h264_aac: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    plan = plan_transcode(sample_h264_aac.to_item(ITEM_ID), tmp_path, sample_h264_aac.path)
    assert [o.codec for o in plan.outputs] == ["copy", "copy", "copy"]

    run_transcode(plan, ffmpeg_path, lambda _: None, AbortSignal())

    video = describe_streams(tmp_path / "video.mp4", ffmpeg_path)
    assert [(s.type, s.codec, s.width, s.height) for s in video] == [("Video", "h264", 320, 240)]
    english = describe_streams(tmp_path / "audio" / "1-eng.m4a", ffmpeg_path)
    assert [(s.type, s.codec, s.language, s.channels) for s in english] == [
        ("Audio", "aac", "eng", 2)
    ]
    french = describe_streams(tmp_path / "audio" / "2-fra.m4a", ffmpeg_path)
    assert [(s.type, s.codec, s.language, s.channels) for s in french] == [
        ("Audio", "aac", "fra", 1)
    ]
    # ffmpeg's MP4 reader guesses MacRoman for track names; the bytes are UTF-8.
    assert "Français \u2013 commentaire".encode() in (tmp_path / "audio" / "2-fra.m4a").read_bytes()
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "1-eng.m4a",
        "2-fra.m4a",
        "video.mp4",
    ]


def test_other_codecs_are_reencoded_to_h264_and_aac(
    sample_mpeg4_mp3: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    plan = plan_transcode(sample_mpeg4_mp3.to_item(ITEM_ID), tmp_path, sample_mpeg4_mp3.path)
    assert [o.codec for o in plan.outputs] == ["libx264", "aac", "aac"]

    run_transcode(plan, ffmpeg_path, lambda _: None, AbortSignal())

    assert [(s.type, s.codec) for s in describe_streams(plan.video.path, ffmpeg_path)] == [
        ("Video", "h264")
    ]
    described = [describe_streams(a.path, ffmpeg_path) for a in plan.audio]
    assert [[(s.type, s.codec, s.language) for s in d] for d in described] == [
        [("Audio", "aac", "eng")],
        [("Audio", "aac", "jpn")],
    ]


def test_progress_reaches_every_frame_at_the_end(
    sample_mpeg4_mp3: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    plan = plan_transcode(sample_mpeg4_mp3.to_item(ITEM_ID), tmp_path, sample_mpeg4_mp3.path)
    assert plan.frames_total == 100
    seen: list[Progress] = []

    run_transcode(plan, ffmpeg_path, seen.append, AbortSignal())

    assert seen, "no progress reported"
    assert {p.phase for p in seen} == {"transcode"}
    frames = [p.frames_done or 0 for p in seen]
    assert frames == sorted(frames)
    assert (seen[-1].frames_done, seen[-1].frames_total) == (100, 100)
    assert seen[-1].percent == 100.0
    assert seen[-1].duration_s == sample_mpeg4_mp3.duration_s


def test_abort_mid_run_kills_ffmpeg_at_once_and_raises_the_reason(
    sample_slow: SampleMedia, tmp_path: Path, ffmpeg_path: str, slow_ffmpeg: str
) -> None:
    plan = slow_plan(sample_slow, tmp_path)
    abort = AbortSignal()
    pids: list[int] = []
    first_progress = threading.Event()
    triggered_at: list[float] = []

    def on_progress(progress: Progress) -> None:
        if not pids:
            pids.extend(ffmpeg_children(os.getpid(), ffmpeg_path))
            first_progress.set()

    def cancel_after_first_progress() -> None:
        if first_progress.wait(timeout=60):
            triggered_at.append(time.monotonic())
            abort.trigger(JobCancelled("cancelled by the test"))

    canceller = threading.Thread(target=cancel_after_first_progress)
    canceller.start()
    try:
        with pytest.raises(JobCancelled, match="cancelled by the test"):
            run_transcode(plan, slow_ffmpeg, on_progress, abort)
    finally:
        canceller.join()
    stopped_after = time.monotonic() - triggered_at[0]

    assert stopped_after < 1.0
    assert len(pids) == 1
    assert proc_stat(pids[0]) is None, "ffmpeg must be killed and reaped"


def test_abort_before_start_runs_nothing(
    sample_h264_aac: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    plan = plan_transcode(sample_h264_aac.to_item(ITEM_ID), tmp_path, sample_h264_aac.path)
    abort = AbortSignal()
    abort.trigger(LeaseLost("lease taken over"))

    with pytest.raises(LeaseLost):
        run_transcode(plan, ffmpeg_path, lambda _: None, abort)

    assert not plan.video.path.exists()


def test_a_raising_callback_stops_ffmpeg_and_propagates(
    sample_slow: SampleMedia, tmp_path: Path, ffmpeg_path: str, slow_ffmpeg: str
) -> None:
    plan = slow_plan(sample_slow, tmp_path)
    pids: list[int] = []
    raised_at: list[float] = []

    def on_progress(progress: Progress) -> None:
        pids.extend(ffmpeg_children(os.getpid(), ffmpeg_path))
        raised_at.append(time.monotonic())
        raise LeaseLost("another worker owns the job")

    with pytest.raises(LeaseLost, match="another worker"):
        run_transcode(plan, slow_ffmpeg, on_progress, AbortSignal())

    assert time.monotonic() - raised_at[0] < 1.0, "ffmpeg must be killed, not waited for"
    assert len(pids) == 1
    assert proc_stat(pids[0]) is None


def test_ffmpeg_killed_from_outside_is_transient(
    sample_slow: SampleMedia, tmp_path: Path, ffmpeg_path: str, slow_ffmpeg: str
) -> None:
    plan = slow_plan(sample_slow, tmp_path)
    killed: list[int] = []

    def on_progress(progress: Progress) -> None:
        if not killed:
            for pid in ffmpeg_children(os.getpid(), ffmpeg_path):
                os.kill(pid, signal.SIGKILL)  # what the OOM killer would do
                killed.append(pid)

    with pytest.raises(TransientError, match="killed by SIGKILL"):
        run_transcode(plan, slow_ffmpeg, on_progress, AbortSignal())

    assert killed


def test_corrupt_media_fails_permanently_with_ffmpegs_reason(
    sample_h264_aac: SampleMedia, tmp_path: Path, ffmpeg_path: str
) -> None:
    broken = corrupt_copy(sample_h264_aac.path, tmp_path / "broken.mkv")
    plan = plan_transcode(sample_h264_aac.to_item(ITEM_ID), tmp_path / "out", broken)

    with pytest.raises(PermanentError) as failure:
        run_transcode(plan, ffmpeg_path, lambda _: None, AbortSignal())

    message = str(failure.value)
    assert message.startswith("ffmpeg failed (exit ")
    assert "Invalid data found when processing input" in message


# The worker process dies (kill -9) while its ffmpeg runs: PDEATHSIG must take ffmpeg down.
_WORKER_SCRIPT = """
import sys
from pathlib import Path
from mirror.domain.progress import AbortSignal
from mirror.demo.media import generate_sample
from mirror.transcode import plan_transcode, run_transcode
from mirror.domain.item import MediaItem, MediaStream

source, work_dir, ffmpeg = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
video = MediaStream(index=0, type="Video", codec="mpeg4", frame_rate=25.0)
item = MediaItem(id="a" * 32, name="x", type="Movie", container="mkv", size=None,
                 duration_s=20.0, streams=(video,))
plan = plan_transcode(item, work_dir, source, x264_preset="ultrafast")

def on_progress(progress):
    print("progress", flush=True)

run_transcode(plan, ffmpeg, on_progress, AbortSignal())
print("finished", flush=True)
"""


def test_killing_the_worker_process_takes_ffmpeg_down(
    sample_slow: SampleMedia, tmp_path: Path, ffmpeg_path: str, slow_ffmpeg: str
) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER_SCRIPT, str(sample_slow.path), str(tmp_path), slow_ffmpeg],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert worker.stdout is not None
        ready, _, _ = select.select([worker.stdout], [], [], 60)
        assert ready and worker.stdout.readline() == b"progress\n"
        (ffmpeg_pid,) = ffmpeg_children(worker.pid, ffmpeg_path)

        worker.kill()
        worker.wait()

        wait_until(lambda: not is_alive(ffmpeg_pid), timeout=5, what="the orphaned ffmpeg to die")
    finally:
        worker.kill()
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()


def test_stderr_flood_is_drained_without_blocking_the_child() -> None:
    # 4 MiB on stderr: far past the 64 KiB pipe buffer that would block an undrained child.
    flood = (
        "import sys\n"
        "for i in range(40000):\n"
        "    sys.stderr.write(f'line {i} ' + 'x' * 100 + '\\n')\n"
        "print('progress=end', flush=True)\n"
    )
    with spawn([sys.executable, "-c", flood]) as child:
        assert child.stdout is not None and child.stderr is not None
        tail = StderrTail(child.stderr)
        tail.start()
        out = child.stdout.read()
        assert child.wait(timeout=60) == 0
        tail.join()

    assert out == b"progress=end\n"
    lines = tail.lines()
    assert len(lines) == 200
    assert lines[-1].startswith("line 39999 ")
