"""What the scrubbing thumbnails add to the transcode: CPU seconds of ffmpeg, with vs without.

Inputs (generated once into bench/data/thumbnails/):
- a 1080p H.264 (x264, 2 s GOP: 48 frames at 24 fps, as film encodes are cut) + AAC
  MKV with picture noise, 120 s (quick mode: 20 s);
- the same plan run with `run_transcode`, MIRROR_THUMBNAILS off and on (a thumbnail
  every 10 s): once with `auto` codecs (the video copied: a remux, where the thumbnails
  are the only decoding, keyframes only) and once re-encoded (libx264 veryfast CRF 23,
  on a 30 s cut, quick: 10 s: the thumbnails share the re-encode's decode).
The figure is the CPU time (user + sys) of the ffmpeg child, from getrusage, median of
3 runs each (the machine is shared: CPU time, not wall time). Prints the added CPU per
hour of video and as a share of the run, the LAST line the remux case.
Usage: python bench/thumbnails.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import resource
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import harness
from harness import say

from mirror.domain.item import MediaItem, MediaStream
from mirror.domain.progress import AbortSignal
from mirror.transcode import TranscodePlan, plan_transcode, probe_file, run_transcode

ROUNDS = 3
ITEM_ID = "7b1c0d2e3f4a5b6c7d8e9f0a1b2c3d4e"


def sample(ffmpeg: str, seconds: int) -> Path:
    path = harness.data_dir("thumbnails") / f"noise-1080p-gop48-{seconds}s.mkv"
    if not path.exists():
        say(f"generating {path.name}")
        subprocess.run(
            [ffmpeg, "-v", "error", "-y",
             "-f", "lavfi", "-i", f"testsrc2=size=1920x1080:rate=24:duration={seconds}",
             "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}",
             "-vf", "noise=alls=12:allf=t", "-c:v", "libx264", "-preset", "veryfast",
             "-g", "48", "-keyint_min", "48", "-c:a", "aac", "-shortest", str(path)],
            check=True,
        )  # fmt: skip
    return path


def child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_of(plan: TranscodePlan, ffmpeg: str) -> float:
    """The median CPU seconds of ffmpeg running `plan`."""
    runs: list[float] = []
    for _ in range(ROUNDS):
        shutil.rmtree(plan.output_dir, ignore_errors=True)
        before = child_cpu_s()
        run_transcode(plan, ffmpeg, lambda progress: None, AbortSignal())
        runs.append(child_cpu_s() - before)
    return harness.median(runs)


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = harness.ffmpeg_binary()
    seconds = 20 if quick else 120
    source = sample(ffmpeg, seconds)
    probe = probe_file(source, ffmpeg)
    streams = (
        MediaStream(index=0, type="Video", codec="h264", frame_rate=24.0),
        MediaStream(index=1, type="Audio", codec="aac", language="eng"),
    )
    item = MediaItem(
        id=ITEM_ID, name="Bench", type="Movie", container="mkv",
        size=source.stat().st_size, duration_s=float(seconds), streams=streams,
    )  # fmt: skip
    work = harness.data_dir("thumbnails", "work")
    lines = []
    cases = [("remux (video copied)", "auto", source, seconds)]
    cut_s = 10 if quick else 30
    cut = harness.data_dir("thumbnails") / f"cut-{cut_s}s.mkv"
    if not cut.exists():
        subprocess.run(
            [ffmpeg, "-v", "error", "-y", "-i", str(source), "-t", str(cut_s), "-c", "copy",
             str(cut)],
            check=True,
        )  # fmt: skip
    cases.append(("re-encode (libx264 veryfast)", "libx264", cut, cut_s))
    for name, codec, path, length in cases:
        clip = replace(item, duration_s=float(length))
        read = probe_file(path, ffmpeg) if path != source else probe
        plan, with_thumbnails = (
            plan_transcode(
                clip,
                work,
                path,
                probe=read,
                video_codec=codec,  # type: ignore[arg-type]
                output_format="hls",
                thumbnail_interval_s=interval,
            )
            for interval in (None, 10.0)
        )
        say(f"{name}: {length} s of 1080p, 3 runs without thumbnails, 3 with")
        without = cpu_of(plan, ffmpeg)
        added = cpu_of(with_thumbnails, ffmpeg) - without
        per_hour = added * 3600 / length
        # A negative difference is the spread between runs: the thumbnails cost less.
        lines.append(
            f"{name}: ffmpeg CPU {without:.2f} s without thumbnails, {added:+.2f} s with "
            f"({100 * added / without:+.1f} %), {per_hour:+.0f} CPU-s per hour of video"
        )
    shutil.rmtree(work, ignore_errors=True)
    for line in reversed(lines):
        print(line)


if __name__ == "__main__":
    main()
