"""Issue 23 point 4: hardware encoders when present, libx264 otherwise.

No GPU here: a fake ffmpeg (a shell script) lists encoders and passes or fails the test
encode, as a build with NVENC but no driver, or with a working VAAPI device, would.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mirror.domain.errors import ConfigError, TransientError
from mirror.domain.item import MediaItem, MediaStream
from mirror.domain.progress import AbortSignal, Progress
from mirror.runner.heartbeat import Heartbeat
from mirror.testing.fake_queue import InMemoryJobQueue
from mirror.transcode import build_command, plan_transcode, run_transcode
from mirror.transcode.encoder_probe import choose_video_encoder, parse_encoders
from mirror.transcode.encoders import VideoQuality, encoder_options
from mirror.views import detail_rows

ENCODERS_LISTING = """Encoders:
 V..... = Video
 A..... = Audio
 ------
 V....D libx264              libx264 H.264 / AVC / MPEG-4 AVC / MPEG-4 part 10 (codec h264)
 V....D h264_nvenc           NVIDIA NVENC H.264 encoder (codec h264)
 V..... h264_qsv             H.264 (Intel Quick Sync Video acceleration) (codec h264)
 V....D h264_vaapi           H.264/AVC (VAAPI) (codec h264)
 A....D aac                  AAC (Advanced Audio Coding)
"""


def fake_ffmpeg(tmp_path: Path, *, working: str = "", listed: str = ENCODERS_LISTING) -> str:
    """An `ffmpeg` that lists `listed` and encodes only with the encoder named `working`
    (every call is appended to calls.log beside it)."""
    (tmp_path / "listing.txt").write_text(listed)
    script = tmp_path / "ffmpeg"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{tmp_path}/calls.log"\n'
        f'case "$*" in *-encoders*) cat "{tmp_path}/listing.txt"; exit 0;; esac\n'
        f'case "$*" in *"-c:v {working or "none"} "*) exit 0;; esac\n'
        'echo "[encoder @ 0x1] Cannot load the driver" >&2; exit 1\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_listing_is_parsed_into_encoder_names() -> None:
    assert parse_encoders(ENCODERS_LISTING) == {
        "libx264",
        "h264_nvenc",
        "h264_qsv",
        "h264_vaapi",
        "aac",
    }


def test_auto_takes_the_first_hardware_encoder_whose_test_encode_passes(tmp_path: Path) -> None:
    ffmpeg = fake_ffmpeg(tmp_path, working="h264_vaapi")

    choice = choose_video_encoder(
        "auto", ffmpeg, render_nodes=["/dev/dri/renderD129"], nvidia_present=True
    )

    assert (choice.encoder, choice.device) == ("h264_vaapi", "/dev/dri/renderD129")
    tried = [line for line in calls(tmp_path) if "-c:v" in line]
    assert [line.split("-c:v ")[1].split()[0] for line in tried] == [
        "h264_nvenc",
        "h264_qsv",
        "h264_vaapi",
    ]
    assert "-vaapi_device /dev/dri/renderD129" in tried[-1]
    assert "hwupload" in tried[-1]


def test_auto_falls_back_to_libx264_saying_why(tmp_path: Path) -> None:
    ffmpeg = fake_ffmpeg(tmp_path)

    choice = choose_video_encoder("auto", ffmpeg, render_nodes=["/dev/dri/renderD128"],
                                  nvidia_present=False)  # fmt: skip

    assert choice.encoder == "libx264"
    assert "h264_nvenc: no device" in choice.reason
    assert "h264_qsv: [encoder @ 0x1] Cannot load the driver" in choice.reason
    assert choice.describe().startswith("libx264 (auto: ")


def test_auto_without_devices_makes_no_test_encode(tmp_path: Path) -> None:
    ffmpeg = fake_ffmpeg(tmp_path, working="h264_nvenc")

    choice = choose_video_encoder("auto", ffmpeg, render_nodes=[], nvidia_present=False)

    assert choice.encoder == "libx264"
    assert len(calls(tmp_path)) == 1  # `-encoders` only: worker start-up stays quick


def test_an_explicit_encoder_that_fails_its_test_stops_start_up(tmp_path: Path) -> None:
    ffmpeg = fake_ffmpeg(tmp_path, working="h264_nvenc")
    assert choose_video_encoder("h264_nvenc", ffmpeg).encoder == "h264_nvenc"

    with pytest.raises(
        ConfigError, match=r"^MIRROR_VIDEO_ENCODER=h264_qsv: the test encode failed"
    ):
        choose_video_encoder("h264_qsv", ffmpeg)
    only_software = fake_ffmpeg(tmp_path, listed=" V....D libx264   libx264 H.264\n")
    with pytest.raises(ConfigError, match=r"has no h264_vaapi encoder"):
        choose_video_encoder("h264_vaapi", only_software)


def test_libx264_asks_nothing_of_ffmpeg(tmp_path: Path) -> None:
    ffmpeg = fake_ffmpeg(tmp_path)
    assert choose_video_encoder("libx264", ffmpeg).encoder == "libx264"
    assert calls(tmp_path) == []


def test_each_encoder_gets_its_quality_settings_and_hand_over() -> None:
    filters = ("bwdif=mode=send_frame", "setparams=color_primaries=bt709")
    quality = VideoQuality(preset="veryfast", crf=23)

    x264 = encoder_options("libx264", quality, filters)
    assert x264.global_options == ()
    assert x264.output_with_filters() == {
        "c:v": "libx264",
        "preset": "veryfast",
        "crf": 23,
        "pix_fmt": "yuv420p",
        "vf": ",".join(filters),
    }
    assert x264.filters == filters  # for a -filter_complex branch (renditions)
    nvenc = encoder_options("h264_nvenc", quality, filters).output_with_filters()
    assert (nvenc["preset"], nvenc["rc"], nvenc["cq"], nvenc["b:v"]) == ("p4", "vbr", 23, "0")
    assert nvenc["vf"] == ",".join(filters)  # NVENC uploads memory frames itself
    qsv = encoder_options("h264_qsv", quality, filters).output_with_filters()
    assert (qsv["preset"], qsv["global_quality"]) == ("veryfast", 23)
    assert qsv["vf"].endswith(",format=nv12")
    vaapi = encoder_options("h264_vaapi", quality, filters, device="/dev/dri/renderD129")
    assert vaapi.global_options == ("-vaapi_device", "/dev/dri/renderD129")
    assert vaapi.filters == (*filters, "format=nv12", "hwupload")
    assert vaapi.output["global_quality"] == 23


def test_a_bitrate_cap_fits_every_encoder() -> None:
    """A rendition's maxrate (helper `ladder`): capped CRF for x264, VBR under it for the
    hardware encoders; its scale filter comes before the hand-over."""
    capped = VideoQuality(crf=23, max_bitrate=3_000_000)
    scale = ("scale=-2:720",)
    assert encoder_options("libx264", capped, scale).output["maxrate"] == 3_000_000
    assert encoder_options("libx264", capped, scale).output["bufsize"] == 6_000_000
    assert encoder_options("h264_nvenc", capped, scale).output["maxrate"] == 3_000_000
    qsv = encoder_options("h264_qsv", capped, scale).output
    assert (qsv["b:v"], qsv["maxrate"]) == (2_250_000, 3_000_000)
    vaapi = encoder_options("h264_vaapi", capped, scale).output_with_filters()
    assert (vaapi["rc_mode"], vaapi["maxrate"]) == ("VBR", 3_000_000)
    assert vaapi["vf"] == "scale=-2:720,format=nv12,hwupload"


def test_a_vaapi_plan_opens_the_device_before_the_input() -> None:
    item = MediaItem(
        id="a" * 32, name="Movie", type="Movie", container="mkv", size=1000, duration_s=10.0,
        streams=(MediaStream(index=0, type="Video", codec="mpeg2video", frame_rate=25.0),),
    )  # fmt: skip
    plan = plan_transcode(
        item, Path("/w"), Path("/w/source.mkv"), video_encoder="h264_vaapi",
        encoder_device="/dev/dri/renderD128",
    )  # fmt: skip
    argv = build_command(plan, "ffmpeg")

    assert argv.index("-vaapi_device") < argv.index("-i")
    assert argv[argv.index("-c:v") + 1] == "h264_vaapi"
    assert "libx264" not in argv and "-crf" not in argv


def test_the_heartbeat_names_the_workers_encoder() -> None:
    queue = InMemoryJobQueue()
    queue.enqueue(["b" * 32])
    lease = queue.claim_next("host:1:0")
    assert lease is not None
    beat = Heartbeat(queue, lease.job_id, lease.token, interval=10, stall_timeout=60,
                     lease_timeout=60, encoder="h264_nvenc")  # fmt: skip

    beat(Progress(phase="transcode", frames_done=10))

    record = queue.latest_for_item("b" * 32)
    assert record.heartbeat_data == {
        "phase": "transcode",
        "frames_done": 10,
        "encoder": "h264_nvenc",
    }
    assert ("encoder", "h264_nvenc") in detail_rows(record)  # mirror show, the job page


def test_a_busy_nvenc_is_a_transient_failure(tmp_path: Path) -> None:
    """Every NVENC session taken (a GeForce caps them): retried later, not failed for good."""
    script = tmp_path / "ffmpeg"
    script.write_text(
        "#!/bin/sh\necho '[h264_nvenc @ 0x1] OpenEncodeSessionEx failed: out of memory (10)' >&2\n"
        "exit 1\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    item = MediaItem(
        id="a" * 32, name="Movie", type="Movie", container="mkv", size=1000, duration_s=10.0,
        streams=(MediaStream(index=0, type="Video", codec="mpeg2video", frame_rate=25.0),),
    )  # fmt: skip
    plan = plan_transcode(item, tmp_path / "out", tmp_path / "source.mkv",
                          video_encoder="h264_nvenc")  # fmt: skip

    with pytest.raises(TransientError, match="OpenEncodeSessionEx failed"):
        run_transcode(plan, str(script), lambda progress: None, AbortSignal())
