"""What plays in Jellyfin plays the same from the mirror: picture shapes (issue 19, 4-6, 8).

Each shape of mirror.testing.picture_samples goes through the real pipeline and worker
in this process (real ffmpeg, in-memory Jellyfin / S3 / queue), and the assertions are
on what landed in the store: the video decodes, lasts as long as the source, has even
sides and the displayed aspect, is progressive, is tagged BT.709 (or says its HDR in
the master when copied), and master.m3u8 carries FRAME-RATE and the displayed
RESOLUTION.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia
from mirror.pipeline.steps import TranscodeOptions
from mirror.testing import picture_samples
from mirror.transcode.picture_listing import Picture
from mirror.transcode.plan import VideoCodecSetting
from mirror.transcode.probe import ProbedStream
from mirror.transcode.verify import duration_tolerance
from tests.fixtures.inprocess import PREFIX, InProcess

Generator = Callable[..., SampleMedia]


@dataclass(frozen=True)
class Mirrored:
    video_path: Path
    video: ProbedStream
    duration_s: float | None
    stream_inf: dict[str, str]  # master.m3u8's EXT-X-STREAM-INF attributes

    @property
    def picture(self) -> Picture:
        return self.video.picture


def mirror_sample(
    inproc: InProcess, sample: SampleMedia, tmp_path: Path, video_codec: VideoCodecSetting
) -> Mirrored:
    inproc.transcode = TranscodeOptions(
        ffmpeg_path=inproc.ffmpeg_path, video_codec=video_codec, output_format="hls"
    )
    item = inproc.add(sample, name="Picture Sample")
    inproc.enqueue(item)
    inproc.run_burst()
    job = inproc.job(item)
    assert job.status == "done", job.error
    probed = inproc.read_back(f"{PREFIX}/{item}/video.mp4", tmp_path)
    master = inproc.fake_store.body(f"{PREFIX}/{item}/master.m3u8").decode()
    (line,) = [row for row in master.splitlines() if row.startswith("#EXT-X-STREAM-INF:")]
    attributes = dict(
        re.findall(r'([A-Z-]+)=("[^"]*"|[^,]*)', line.removeprefix("#EXT-X-STREAM-INF:"))
    )
    (video,) = probed.streams
    return Mirrored(
        tmp_path / "s3" / PREFIX / item / "video.mp4", video, probed.duration_s, attributes
    )


def run_filter(ffmpeg: str, path: Path, video_filter: str, frames: int | None = None) -> str:
    """Decode `path` through `video_filter` to nowhere; ffmpeg's log (stderr)."""
    limit = ["-frames:v", str(frames)] if frames else []
    result = subprocess.run(
        [ffmpeg, "-nostdin", "-hide_banner", "-i", str(path), "-vf", video_filter, *limit,
         "-f", "null", "-"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return result.stderr


def assert_decodes(ffmpeg: str, path: Path) -> None:
    result = subprocess.run(
        [ffmpeg, "-nostdin", "-v", "error", "-i", str(path), "-f", "null", "-"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def interlaced_share(ffmpeg: str, path: Path) -> float:
    """idet's per-frame verdict: the share of frames it finds interlaced (TFF or BFF).

    (Its multi-frame verdict carries a few frames of history from the first frames.)
    """
    log = run_filter(ffmpeg, path, "idet")
    counts = re.findall(
        r"Single frame detection: TFF:\s*(\d+) BFF:\s*(\d+) Progressive:\s*(\d+)", log
    )
    tff, bff, progressive = (int(n) for n in counts[-1])
    assert tff + bff + progressive > 0, log
    return (tff + bff) / (tff + bff + progressive)


def luma_and_saturation(ffmpeg: str, path: Path, frames: int = 10) -> tuple[float, float]:
    """Mean YAVG and SATAVG (signalstats, 8-bit scale) over the first frames."""
    log = run_filter(ffmpeg, path, "signalstats,metadata=print", frames)
    luma = [float(v) for v in re.findall(r"lavfi\.signalstats\.YAVG=([\d.]+)", log)]
    saturation = [float(v) for v in re.findall(r"lavfi\.signalstats\.SATAVG=([\d.]+)", log)]
    assert luma and saturation, log
    return sum(luma) / len(luma), sum(saturation) / len(saturation)


def rgb_difference(ffmpeg: str, source: Path, output: Path) -> float:
    """Mean absolute difference (0-255) of the first frames as a player turns them into
    RGB: each decoded by its own matrix tag (an untagged SD one as BT.601), 96x54."""

    def rgb(path: Path) -> bytes:
        return subprocess.run(
            [ffmpeg, "-nostdin", "-v", "error", "-i", str(path), "-frames:v", "1",
             "-vf", "scale=96:54:flags=area,format=rgb24", "-f", "rawvideo", "-"],
            capture_output=True, check=True,
        ).stdout  # fmt: skip

    before, after = rgb(source), rgb(output)
    assert len(before) == len(after) == 96 * 54 * 3
    return sum(abs(a - b) for a, b in zip(before, after, strict=True)) / len(before)


def assert_common(ffmpeg: str, sample: SampleMedia, out: Mirrored, frame_rate: str) -> None:
    assert_decodes(ffmpeg, out.video_path)
    assert out.duration_s is not None
    assert abs(out.duration_s - sample.duration_s) <= duration_tolerance(sample.duration_s)
    assert out.stream_inf["FRAME-RATE"] == frame_rate


def assert_bt709_square_even(out: Mirrored, displayed: tuple[int, int]) -> None:
    """A re-encode: even sides, square pixels, the source's displayed aspect, BT.709."""
    width, height = out.video.width, out.video.height
    assert width is not None and height is not None
    assert width % 2 == 0 and height % 2 == 0
    assert out.picture.sar in (None, (1, 1))
    assert out.picture.rotation is None
    assert abs((width / height) / (displayed[0] / displayed[1]) - 1) <= 0.01
    assert out.stream_inf["RESOLUTION"] == f"{width}x{height}"
    assert (out.picture.matrix, out.picture.primaries, out.picture.transfer) == ("bt709",) * 3
    assert "VIDEO-RANGE" not in out.stream_inf


def test_odd_sized_source_gets_even_sides_keeping_its_aspect(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.odd_size_mpeg4(tmp_path / "odd", ffmpeg_path=ffmpeg_path)

    out = mirror_sample(inproc, sample, tmp_path, "auto")

    assert out.video.codec == "h264"
    assert_common(ffmpeg_path, sample, out, "25.000")
    assert_bt709_square_even(out, (720, 405))
    # Tagged BT.709 and converted to it: the colours are the untagged BT.601 source's
    # (tagging without converting is about 9 levels off).
    assert rgb_difference(ffmpeg_path, sample.path, out.video_path) < 3


def test_interlaced_dvd_mpeg2_is_deinterlaced_and_shown_at_its_4_3_aspect(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.interlaced_mpeg2(tmp_path / "dvd", ffmpeg_path=ffmpeg_path)
    assert interlaced_share(ffmpeg_path, sample.path) > 0.9  # the source combs

    out = mirror_sample(inproc, sample, tmp_path, "auto")

    assert interlaced_share(ffmpeg_path, out.video_path) < 0.1
    assert out.picture.field_order == "progressive"
    assert_common(ffmpeg_path, sample, out, "25.000")
    assert_bt709_square_even(out, (768, 576))  # 720x576 at SAR 16:15


def test_interlaced_h264_is_reencoded_progressive_not_copied(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.interlaced_h264(tmp_path / "tv", ffmpeg_path=ffmpeg_path)
    assert sample.streams[0].is_interlaced

    out = mirror_sample(inproc, sample, tmp_path, "auto")

    assert interlaced_share(ffmpeg_path, out.video_path) < 0.1
    assert out.picture.field_order == "progressive"
    assert_common(ffmpeg_path, sample, out, "25.000")
    assert_bt709_square_even(out, (720, 576))


@pytest.mark.parametrize("generate", [picture_samples.hdr10_hevc, picture_samples.hlg_hevc])
def test_hdr_is_tone_mapped_to_sdr_bt709_that_is_not_washed_out(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str, generate: Generator
) -> None:
    sample = generate(tmp_path / "hdr", ffmpeg_path=ffmpeg_path)
    reference = tmp_path / "sdr.mp4"  # the same pattern rendered straight to SDR
    subprocess.run(
        [ffmpeg_path, "-nostdin", "-v", "error", "-f", "lavfi", "-i",
         picture_samples.pattern(640, 360, 0.4), "-c:v", "libx264", "-preset", "ultrafast",
         str(reference)],
        check=True,
    )  # fmt: skip

    out = mirror_sample(inproc, sample, tmp_path, "auto")

    sdr_luma, sdr_saturation = luma_and_saturation(ffmpeg_path, reference)
    luma, saturation = luma_and_saturation(ffmpeg_path, out.video_path)
    # Left as PQ/HLG and shown as SDR the pattern keeps a fifth of its saturation.
    assert 0.8 * sdr_luma <= luma <= 1.15 * sdr_luma, (luma, sdr_luma)
    assert saturation >= 0.65 * sdr_saturation, (saturation, sdr_saturation)
    assert_bt709_square_even(out, (640, 360))
    assert_common(ffmpeg_path, sample, out, "25.000")


@pytest.mark.parametrize(
    ("generate", "transfer", "video_range"),
    [
        (picture_samples.hdr10_hevc, "smpte2084", "PQ"),
        (picture_samples.hlg_hevc, "arib-std-b67", "HLG"),
    ],
)
def test_hdr_copied_on_request_says_its_range_in_the_master(
    inproc: InProcess,
    tmp_path: Path,
    ffmpeg_path: str,
    generate: Generator,
    transfer: str,
    video_range: str,
) -> None:
    sample = generate(tmp_path / "hdr", ffmpeg_path=ffmpeg_path)

    out = mirror_sample(inproc, sample, tmp_path, "copy")

    assert out.video.codec == "hevc"
    assert out.picture.transfer == transfer
    assert out.stream_inf["VIDEO-RANGE"] == video_range
    assert out.stream_inf["RESOLUTION"] == "640x360"
    assert_common(ffmpeg_path, sample, out, "25.000")


def test_anamorphic_copy_lists_its_displayed_resolution(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.anamorphic_h264(tmp_path / "pal", ffmpeg_path=ffmpeg_path)

    out = mirror_sample(inproc, sample, tmp_path, "auto")

    assert (out.video.codec, out.video.width, out.video.height) == ("h264", 720, 576)
    assert out.picture.sar == (64, 45)  # copied as it is
    assert out.stream_inf["RESOLUTION"] == "1024x576"
    assert_common(ffmpeg_path, sample, out, "25.000")


def test_anamorphic_reencode_bakes_square_pixels(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.anamorphic_h264(tmp_path / "pal", ffmpeg_path=ffmpeg_path)

    out = mirror_sample(inproc, sample, tmp_path, "libx264")

    assert (out.video.width, out.video.height) == (1024, 576)
    assert_common(ffmpeg_path, sample, out, "25.000")
    assert_bt709_square_even(out, (1024, 576))


def test_rotated_phone_video_copy_lists_portrait_resolution(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.rotated_h264(tmp_path / "phone", ffmpeg_path=ffmpeg_path)

    out = mirror_sample(inproc, sample, tmp_path, "auto")

    assert (out.video.width, out.video.height, out.picture.rotation) == (1280, 720, -90)
    assert out.stream_inf["RESOLUTION"] == "720x1280"
    assert_common(ffmpeg_path, sample, out, "25.000")


def test_rotated_phone_video_reencode_is_upright_portrait(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    sample = picture_samples.rotated_h264(tmp_path / "phone", ffmpeg_path=ffmpeg_path)

    out = mirror_sample(inproc, sample, tmp_path, "libx264")

    assert (out.video.width, out.video.height) == (720, 1280)
    assert_common(ffmpeg_path, sample, out, "25.000")
    assert_bt709_square_even(out, (720, 1280))


def test_dolby_vision_profile_5_fails_the_job_naming_the_item_before_any_download(
    inproc: InProcess, tmp_path: Path, ffmpeg_path: str
) -> None:
    # No Dolby Vision encoder here: an HEVC file that Jellyfin lists as profile 5.
    sample = picture_samples.hdr10_hevc(tmp_path / "dv", ffmpeg_path=ffmpeg_path)
    video, *rest = sample.streams
    dv5 = replace(video, dv_profile=5, video_range_type="DOVI", color_transfer=None)
    item = inproc.add(replace(sample, streams=(dv5, *rest)), name="Dune Part Two")
    inproc.enqueue(item)

    inproc.run_burst()

    job = inproc.job(item)
    assert (job.status, job.attempts) == ("failed", 1)
    assert job.error is not None and "\n" not in job.error
    assert f"item {item} (Dune Part Two) is Dolby Vision profile 5" in job.error
    assert inproc.fake_media.download_requests == []
    assert inproc.fake_store.object_keys() == []
