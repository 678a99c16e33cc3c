"""Run one planned ffmpeg job: progress out, abort in, a clear error when it fails."""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Callable

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback
from mirror.transcode.command import build_command
from mirror.transcode.feed import FeedSource, SourceFeeder
from mirror.transcode.outputs import TranscodePlan
from mirror.transcode.process import StderrTail, kill_group, spawn
from mirror.transcode.progress_lines import FfmpegProgressParser
from mirror.transcode.stereo import make_stereo_tracks

# ffmpeg exits non-zero on these when the machine, not the media, is at fault.
_TRANSIENT_MARKERS = (
    "No space left on device",
    "Cannot allocate memory",
    "Resource temporarily unavailable",
    "Disk quota exceeded",
    # NVENC: no free encoder session (a GeForce caps them; other jobs hold them now).
    "OpenEncodeSessionEx failed",
)


def run_transcode(
    plan: TranscodePlan,
    ffmpeg_path: str,
    on_progress: ProgressCallback,
    abort: AbortSignal,
    *,
    growing_source: FeedSource | None = None,
    wait_for_room: Callable[[], None] | None = None,
) -> None:
    """Write every output of `plan` with one ffmpeg run, reporting progress as it goes.

    With `growing_source` ffmpeg reads the source through a pipe while it downloads,
    each chunk fed once `wait_for_room` returns (backpressure from the upload). A source
    read by path gets none: ffmpeg reads it at its own pace.

    Raises the abort's reason when the signal fires (ffmpeg is killed at once), whatever
    `on_progress` raises (after killing ffmpeg), PermanentError when ffmpeg rejects the
    media and TransientError when it was killed or the machine ran out of something.
    Never returns or raises with ffmpeg still running.
    """
    abort.raise_if_set()
    binary = shutil.which(ffmpeg_path)
    if binary is None:
        raise TransientError(f"ffmpeg not found or not executable: {ffmpeg_path}")
    for output in (*plan.outputs, *plan.subtitles):
        output.path.parent.mkdir(parents=True, exist_ok=True)
    for track in plan.audio:
        if track.downmix is not None:
            track.downmix.intermediate.parent.mkdir(parents=True, exist_ok=True)
    if plan.thumbnails is not None:  # an earlier attempt's sheets must not count as ours
        shutil.rmtree(plan.thumbnails.directory, ignore_errors=True)
        plan.thumbnails.directory.mkdir(parents=True)
    fed = growing_source is not None
    argv = build_command(plan, binary, from_stdin=fed)
    try:
        process = spawn(argv, stdin_pipe=fed)
    except OSError as exc:
        raise TransientError(f"cannot start ffmpeg ({binary}): {exc.strerror or exc}") from exc
    feeder = None
    if growing_source is not None:
        assert process.stdin is not None
        feeder = SourceFeeder(
            growing_source, process.stdin, lambda: kill_group(process), wait_for_room
        )
        feeder.start()
    last: list[Progress] = []  # the main run's final progress, which the stereo passes keep

    def heard(progress: Progress) -> None:
        last[:] = [progress]
        on_progress(progress)

    with process:
        try:
            returncode, stderr = _supervise(process, plan, heard, abort)
        finally:
            if feeder is not None:
                # ffmpeg is gone: a feeder still waiting for bytes ends on its own at the
                # next write into the closed pipe; only its error matters here.
                feeder.join(timeout=1.0)
    abort.raise_if_set()
    if feeder is not None and feeder.error is not None:
        raise feeder.error
    _raise_for_exit(returncode, stderr)
    # The stereo tracks: measured and encoded from the downmixes this run wrote.
    make_stereo_tracks(plan, binary, abort, on_progress, last[0] if last else None)
    _verify_outputs(plan)


def _supervise(
    process: subprocess.Popen[bytes],
    plan: TranscodePlan,
    on_progress: ProgressCallback,
    abort: AbortSignal,
) -> tuple[int, StderrTail]:
    """Feed progress until ffmpeg ends; on any way out, leave no process behind."""
    assert process.stdout is not None and process.stderr is not None
    stderr = StderrTail(process.stderr)
    stderr.start()
    unregister = abort.on_abort(lambda: kill_group(process))
    try:
        parser = FfmpegProgressParser(frames_total=plan.frames_total, duration_s=plan.duration_s)
        for raw in process.stdout:
            progress = parser.feed(raw.decode("utf-8", errors="replace"))
            if progress is not None:
                on_progress(progress)
        return process.wait(), stderr
    finally:
        unregister()
        if process.poll() is None:
            kill_group(process)
        process.wait()
        stderr.join()


def _raise_for_exit(returncode: int, stderr: StderrTail) -> None:
    if returncode == 0:
        return
    tail = stderr.text() or "(no error output)"
    if returncode < 0:
        name = _signal_name(-returncode)
        raise TransientError(f"ffmpeg was killed by {name}: {tail}")
    if any(marker in tail for marker in _TRANSIENT_MARKERS):
        raise TransientError(f"ffmpeg failed (exit {returncode}): {tail}")
    raise PermanentError(f"ffmpeg failed (exit {returncode}): {tail}")


def _verify_outputs(plan: TranscodePlan) -> None:
    for output in plan.outputs:
        if not output.path.is_file() or output.path.stat().st_size == 0:
            raise PermanentError(
                f"ffmpeg exited cleanly but wrote nothing to {output.relative_path}"
            )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
