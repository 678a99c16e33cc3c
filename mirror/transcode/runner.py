"""Run one planned ffmpeg job: progress out, abort in, a clear error when it fails."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback
from mirror.transcode.command import build_command
from mirror.transcode.feed import FeedSource, SourceFeeder
from mirror.transcode.outputs import TranscodePlan
from mirror.transcode.process import kill_group, raise_for_exit, spawn, supervise
from mirror.transcode.progress_lines import FfmpegProgressParser
from mirror.transcode.stereo import make_stereo_tracks


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

    parser = FfmpegProgressParser(frames_total=plan.frames_total, duration_s=plan.duration_s)
    with process:
        try:
            returncode, stderr = supervise(process, parser, heard, abort)
        finally:
            if feeder is not None:
                # ffmpeg is gone: a feeder still waiting for bytes ends on its own at the
                # next write into the closed pipe; only its error matters here.
                feeder.join(timeout=1.0)
    abort.raise_if_set()
    if feeder is not None and feeder.error is not None:
        raise feeder.error
    raise_for_exit(returncode, stderr)
    # The stereo tracks: measured and encoded from the downmixes this run wrote.
    make_stereo_tracks(plan, binary, abort, on_progress, last[0] if last else None)
    _verify_outputs(plan)


def _verify_outputs(plan: TranscodePlan) -> None:
    for output in plan.outputs:
        if not output.path.is_file() or output.path.stat().st_size == 0:
            raise PermanentError(
                f"ffmpeg exited cleanly but wrote nothing to {output.relative_path}"
            )
