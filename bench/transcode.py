"""Transcode benchmark: our run_transcode vs the bare ffmpeg command line it runs.

Inputs:
- a 60 s 1920x1080 25 fps H.264/AAC MKV with two audio tracks and a subtitle
  (quick mode: 10 s), made once by mirror.demo.media.generate_sample into
  bench/data/transcode/ and kept;
- the ffmpeg mirror uses (MIRROR_FFMPEG_PATH, PATH, else imageio-ffmpeg's binary);
- the plan from plan_transcode for that item, twice: video_codec=libx264 and
  audio_codec=aac (forced re-encode, preset veryfast, crf 23) and auto/auto (remux:
  streams copied);
- ours: run_transcode(plan, ffmpeg, heartbeat, abort) with a real Heartbeat (in-memory
  store, 1 s interval, keep-alive thread running), i.e. process group, PDEATHSIG shim,
  stderr drain thread and -progress parsing included;
- peer: build_command(plan)'s argv run with subprocess.run (stdout/stderr to
  /dev/null), nothing else;
- remux: warm-up, then 7 rounds (quick: 5) alternating which goes first; re-encode:
  3 rounds (quick: 1), no separate warm-up (the remux runs warmed the page cache).

Prints median wall times, the ratio ours/bare for each mode (target <= 1.03x) and the
remux-vs-re-encode speed-up (target 100x+); the LAST line is the re-encode ratio.
Output format: BENCH_OUTPUT_FORMAT=hls (default, as MIRROR_OUTPUT_FORMAT: fragmented MP4
+ the WebVTT subtitle) or mp4 (faststart files), to compare the two.
Usage: python bench/transcode.py [--quick]   (or BENCH_QUICK=1)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import harness

from mirror.transcode import TranscodePlan, build_command, plan_transcode, run_transcode

ITEM_ID = "7a1b2c3d4e5f60718293a4b5c6d7e8f9"


def run_ours(plan: TranscodePlan, ffmpeg: str) -> float:
    harness.fresh_file(plan.output_dir)
    beat = harness.offline_heartbeat()
    with beat:
        began = time.perf_counter()
        run_transcode(plan, ffmpeg, beat, beat.abort)
        seconds = time.perf_counter() - began
    _check(plan)
    return seconds


def run_bare(plan: TranscodePlan, ffmpeg: str) -> float:
    harness.fresh_file(plan.output_dir)
    # ffmpeg does not make directories; neither do we here
    for output in (*plan.outputs, *plan.subtitles):
        output.path.parent.mkdir(parents=True, exist_ok=True)
    argv = build_command(plan, ffmpeg)
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - began
    _check(plan)
    return seconds


def _check(plan: TranscodePlan) -> None:
    for output in plan.outputs:
        assert output.path.stat().st_size > 0, output.path


def main() -> None:
    quick = harness.quick_mode()
    ffmpeg = shutil.which(harness.ffmpeg_binary()) or harness.ffmpeg_binary()
    seconds = 10 if quick else 60
    sample = harness.cached_sample(
        "transcode", f"sample-1080p-{seconds}s.mkv", ffmpeg, seconds, noise=False
    )
    item = sample.to_item(ITEM_ID)
    work = harness.data_dir("transcode", "work")
    output_format = os.environ.get("BENCH_OUTPUT_FORMAT", "hls")
    assert output_format in ("hls", "mp4"), output_format
    plans = {
        mode: plan_transcode(
            item,
            work / mode,
            sample.path,
            video_codec=video,
            audio_codec=audio,
            output_format="hls" if output_format == "hls" else "mp4",
        )
        for mode, video, audio in (("remux", "auto", "auto"), ("re-encode", "libx264", "aac"))
    }
    assert plans["remux"].video.codec == "copy" and plans["re-encode"].video.codec == "libx264"

    remux = harness.alternate(
        lambda: run_ours(plans["remux"], ffmpeg),
        lambda: run_bare(plans["remux"], ffmpeg),
        rounds=5 if quick else 7,
        label="remux",
    )
    encode = harness.alternate(
        lambda: run_ours(plans["re-encode"], ffmpeg),
        lambda: run_bare(plans["re-encode"], ffmpeg),
        rounds=1 if quick else 3,
        warmup=False,
        label="re-encode",
    )
    harness.fresh_file(work)

    remux_ratio = harness.median(remux.ours) / harness.median(remux.peer)
    encode_ratio = harness.median(encode.ours) / harness.median(encode.peer)
    speedup = harness.median(encode.ours) / harness.median(remux.ours)
    print(f"output format: {output_format}")
    print(
        f"sample: {sample.duration_s:.0f} s 1920x1080 h264/aac x2, {sample.size / 1e6:.1f} MB; "
        f"load: {harness.machine_load()}"
    )
    print(
        f"remux (auto): ours {harness.median(remux.ours):.3f} s, "
        f"bare ffmpeg {harness.median(remux.peer):.3f} s (medians of {len(remux.ours)})"
    )
    print(
        f"re-encode (libx264 veryfast + aac): ours {harness.median(encode.ours):.2f} s, "
        f"bare ffmpeg {harness.median(encode.peer):.2f} s (medians of {len(encode.ours)})"
    )
    print(
        harness.ratio_line(
            "remux ours/bare wall time", remux_ratio, "<= 1.03x", remux_ratio <= 1.03
        )
    )
    print(
        f"remux speed-up over re-encode (ours): {speedup:.0f}x (target 100x+) "
        f"{'PASS' if speedup >= 100 else 'MISS'}"
    )
    print(
        harness.ratio_line(
            "transcode (re-encode) ours/bare wall time",
            encode_ratio,
            "<= 1.03x",
            encode_ratio <= 1.03,
        )
    )


if __name__ == "__main__":
    main()
