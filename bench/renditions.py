"""Renditions benchmark: a 3-rung ladder in one ffmpeg run vs three separate runs.

Inputs:
- a 1920x1080 25 fps H.264/AAC MKV with two audio tracks and a subtitle, 20 s (quick:
  5 s), made once by mirror.demo.media.generate_sample into bench/data/renditions/;
- the ffmpeg mirror uses (MIRROR_FFMPEG_PATH, PATH, else imageio-ffmpeg's binary);
- MIRROR_RENDITIONS=source,720p,480p, format hls, x264 veryfast / CRF 23, in two modes:
  `auto` (the H.264 source rung is copied, 720p and 480p encoded) and `libx264` (all
  three encoded, the source rung at 1080p).
Three ways, each build_command's argv (or the same encoder arguments) run bare with
subprocess.run, outputs to a scratch folder:
- ladder: the one run mirror makes (one decode, `split`, one encode per rung, audio once);
- separate: today's one-rendition run (video + audio, MIRROR_RENDITIONS=source) plus one
  video-only run per lower rung with that rung's arguments (-vf ... scale, x264 options,
  caps): three decodes;
- one rendition: today's run alone.
Rounds: 3 (quick: 1), alternating which goes first. Prints median wall and CPU seconds
(ffmpeg's, from RUSAGE_CHILDREN: other load on the machine disturbs it far less than
wall time) and the ratios ladder/separate (target <= 0.7x) and ladder/one rendition;
the LAST line is the ladder/separate CPU ratio of the `libx264` mode.
Usage: python bench/renditions.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import harness

from mirror.demo.media import SampleMedia
from mirror.testing import picture_samples
from mirror.transcode import TranscodePlan, build_command, plan_transcode, probe_file
from mirror.transcode.command import aligned_keyframe_options

ITEM_ID = "4e1d2c3b4a5968778695a4b3c2d1e0f9"
LADDER = ("source", "720p", "480p")
HDR_LADDER = ("source", "240p", "144p")  # the HDR sample is 360 lines high


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return children.ru_utime + children.ru_stime


def _run(argvs: list[list[str]], work: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the runs one after another, from an empty `work`."""
    harness.fresh_file(work)
    (work / "video").mkdir(parents=True)
    (work / "audio").mkdir()
    (work / "subtitles").mkdir()
    cpu, began = _cpu(), time.perf_counter()
    for argv in argvs:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - began, _cpu() - cpu


def _rung_alone(ladder: TranscodePlan, position: int, ffmpeg: str) -> list[str]:
    """One lower rung as a run of its own: video only, the rung's filters and scale as
    `-vf`, the ladder's keyframes, x264 options and peak-rate cap."""
    rung = ladder.ladder[position]
    alone = replace(
        ladder,
        video=replace(rung, filters=(*rung.filters, f"scale=w=-2:h={rung.scale_height}")),
        ladder=(),
        audio=(),
        subtitles=(),
    )
    argv = build_command(alone, ffmpeg)
    keyframes = (
        "source" if ladder.video.codec == "copy" else argv[argv.index("-force_key_frames") + 1]
    )
    argv[argv.index("-force_key_frames") + 1] = keyframes
    extra: list[str] = []
    for name, value in aligned_keyframe_options("libx264").items():
        extra += [f"-{name}", str(value)]
    extra += ["-maxrate", f"{rung.maxrate_kbps}k", "-bufsize", f"{2 * (rung.maxrate_kbps or 0)}k"]
    return [*argv[:-1], *extra, argv[-1]]


def _measure(
    mode: str, sample: SampleMedia, names: tuple[str, ...], ffmpeg: str, work: Path, rounds: int
) -> dict[str, tuple[float, float]]:
    probe = probe_file(sample.path, ffmpeg)
    item = sample.to_item(ITEM_ID)

    def plan(renditions: tuple[str, ...]) -> TranscodePlan:
        return plan_transcode(item, work, sample.path, probe=probe, output_format="hls",
                              video_codec=mode, renditions=renditions)  # type: ignore[arg-type]  # fmt: skip

    ladder, single = plan(names), plan(("source",))
    assert [v.rendition for v in ladder.videos] == list(names), ladder.videos
    ways = {
        "ladder": [build_command(ladder, ffmpeg)],
        "separate": [build_command(single, ffmpeg)]
        + [_rung_alone(ladder, i, ffmpeg) for i in range(len(ladder.ladder))],
        "one rendition": [build_command(single, ffmpeg)],
    }
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    order = list(ways)
    for round_ in range(rounds):
        for way in order if round_ % 2 == 0 else reversed(order):
            times[way].append(_run(ways[way], work))
            wall, cpu = times[way][-1]
            harness.say(f"{mode} {names[1]} {way}: {wall:.2f} s wall, {cpu:.2f} s CPU")
    harness.fresh_file(work)
    return {
        way: (harness.median([t[0] for t in got]), harness.median([t[1] for t in got]))
        for way, got in times.items()
    }


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = shutil.which(harness.ffmpeg_binary()) or harness.ffmpeg_binary()
    seconds = 5 if quick else 20
    rounds = 1 if quick else 3
    h264 = harness.cached_sample(
        "renditions", f"sample-1080p-{seconds}s.mkv", ffmpeg, seconds, noise=False
    )
    hdr_folder = harness.data_dir("renditions") / f"hdr10-{seconds}s"
    hdr = picture_samples.hdr10_hevc(hdr_folder, duration_s=float(seconds), ffmpeg_path=ffmpeg)
    cases = [
        ("H.264 1080p, auto (source copied)", h264, "auto", LADDER),
        ("H.264 1080p, libx264 (all encoded)", h264, "libx264", LADDER),
        ("HDR10 HEVC 640x360, tone-mapped", hdr, "auto", HDR_LADDER),
    ]
    work = harness.data_dir("renditions", "work")
    lines = [f"{seconds} s samples, medians of {rounds}"]
    last = ""
    for label, sample, mode, names in cases:
        got = _measure(mode, sample, names, ffmpeg, work, rounds)
        lines.append(f"{label}, ladder {','.join(names)}:")
        for way, (wall, cpu) in got.items():
            lines.append(f"  {way}: {wall:.2f} s wall, {cpu:.2f} s CPU")
        for kind, index in (("wall", 0), ("CPU", 1)):
            ladder = got["ladder"][index]
            separate = ladder / got["separate"][index]
            one = ladder / got["one rendition"][index]
            line = harness.ratio_line(
                f"  {label}: ladder/separate {kind}", separate, "<= 0.7x", separate <= 0.7
            )
            lines += [line, f"  {label}: ladder/one rendition {kind}: {one:.2f}x"]
            if mode == "libx264" and kind == "CPU":
                last = line.strip()
    print(f"load: {harness.machine_load()}")
    for line in lines:
        print(line)
    print(last)


if __name__ == "__main__":
    main()
