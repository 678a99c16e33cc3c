"""Make the stereo tracks once the main run has written their downmixes (two passes).

The source is read once, by the main run, often while it is still downloading: loudness
can only be measured over a whole track, so the main run writes each stereo track's
downmix as lossless FLAC beside the outputs (no second decode of the source, no wait for
the download), and after it this module runs, per stereo track, the measuring pass over
that FLAC (EBU R128 meter) and then loudnorm with the measured values, encoding AAC.
Per hour of audio, about 25 CPU-s to measure and 104 to encode (the AAC encoder's own
cost, about 94), besides 25 for the FLAC in the main run (bench/stereo.py; README: A
stereo track people can hear).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import replace

from mirror.domain.errors import PermanentError, TransientError
from mirror.domain.progress import AbortSignal, Progress, ProgressCallback
from mirror.transcode.command import STEREO_GLOBAL_OPTIONS, build_stereo_command, file_argument
from mirror.transcode.downmix import Loudness, measure_filter, parse_loudness
from mirror.transcode.outputs import AudioOutput, TranscodePlan
from mirror.transcode.process import raise_for_exit, spawn, supervise
from mirror.transcode.progress_lines import FfmpegProgressParser


def make_stereo_tracks(
    plan: TranscodePlan,
    ffmpeg_path: str,
    abort: AbortSignal,
    on_progress: ProgressCallback | None = None,
    done: Progress | None = None,
) -> None:
    """Measure and encode every stereo track of `plan`; its downmix is removed after.

    `on_progress` hears `done` (the main run's last progress: the transcode's percent
    stays where it was) with a note that says which pass is how far, so a long film's
    passes are progress to the stall watchdog, not silence."""
    report = _Reporter(on_progress, done, plan.duration_s)
    for track in plan.audio:
        if track.downmix is None:
            continue
        measured = measure_loudness(track, ffmpeg_path, abort, report)
        argv = build_stereo_command(track, measured, ffmpeg_path, fragmented=plan.fragmented)
        _run(argv, abort, report.step(f"{track.relative_path}: encoding"))
        track.downmix.intermediate.unlink(missing_ok=True)
        with suppress(OSError):  # the folder, once its last downmix is gone
            track.downmix.intermediate.parent.rmdir()


def measure_loudness(
    track: AudioOutput, ffmpeg_path: str, abort: AbortSignal, report: _Reporter | None = None
) -> Loudness:
    """The first pass over the track's downmix: the EBU R128 meter's summary on stderr."""
    assert track.downmix is not None
    argv = [
        ffmpeg_path,
        *STEREO_GLOBAL_OPTIONS,
        "-loglevel",
        "info",  # the summary is printed at info level
        "-i",
        file_argument(track.downmix.intermediate),
        "-af",
        measure_filter(),
        "-f",
        "null",
        "-",
    ]
    step = (report or _Reporter(None, None, None)).step(
        f"{track.relative_path}: measuring loudness"
    )
    lines = _run(argv, abort, step)
    measured = parse_loudness("\n".join(lines))
    if measured is None:
        raise PermanentError(
            f"ffmpeg's ebur128 printed no measurement for {track.relative_path}: "
            + "\n".join(lines[-5:])
        )
    return measured


class _Step:
    """One pass: its name, and where its progress goes."""

    def __init__(self, reporter: _Reporter, what: str) -> None:
        self.reporter = reporter
        self.what = what

    def heard(self, progress: Progress) -> None:
        self.reporter.tell(self.what, progress)


class _Reporter:
    def __init__(
        self, sink: ProgressCallback | None, done: Progress | None, duration_s: float | None
    ) -> None:
        self.sink = sink
        self.done = done or Progress(phase="transcode")
        self.duration_s = duration_s

    def step(self, what: str) -> _Step:
        return _Step(self, what)

    def tell(self, what: str, progress: Progress) -> None:
        if self.sink is None:
            return
        percent = progress.percent
        note = f"stereo track {what}" + (f" {percent:.0f}%" if percent is not None else "")
        self.sink(replace(self.done, note=note, speed_factor=progress.speed_factor))


def _run(argv: Sequence[str], abort: AbortSignal, step: _Step) -> list[str]:
    """Run one pass to its end (killed on abort), its `-progress` told to `step`; its
    stderr lines."""
    abort.raise_if_set()
    argv = [argv[0], "-progress", "pipe:1", *argv[1:]]
    try:
        process = spawn(argv)
    except OSError as exc:
        raise TransientError(f"cannot start ffmpeg ({argv[0]}): {exc.strerror or exc}") from exc
    parser = FfmpegProgressParser(frames_total=None, duration_s=step.reporter.duration_s)
    with process:
        returncode, stderr = supervise(process, parser, step.heard, abort)
    abort.raise_if_set()
    raise_for_exit(returncode, stderr, f" {step.what}")
    return stderr.lines()
