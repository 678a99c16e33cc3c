"""Issue 19, points 1-3 and 8 (CHANNELS): what plays in Jellyfin plays the same from
the mirror. Each fidelity sample goes through the real pipeline (worker in this process,
real ffmpeg, in-memory Jellyfin / S3 / queue); its outputs are read back from the store.

Lip sync: the picture's lag behind the sound at the sync mark (tests/fidelity/av_sync.py)
must be the source's to within one audio frame (25 ms), read as MSE players read the
files (edit lists ignored) and as ffmpeg / Safari do (edit lists honoured).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.demo.media import SampleMedia
from mirror.domain.jobs import JobRecord
from mirror.pipeline.steps import TranscodeOptions
from mirror.transcode.audio_config import audio_config, read_moov
from mirror.transcode.outputs import OutputFormat
from mirror.transcode.verify import duration_tolerance
from tests.fidelity.av_sync import mark_of
from tests.fixtures.inprocess import InProcess

SYNC_TOLERANCE_S = 0.025  # one AAC frame at 48 kHz is 21.3 ms

Samples = Callable[[str], SampleMedia]


def mirror_sample(inproc: InProcess, sample: SampleMedia) -> tuple[str, JobRecord]:
    item = inproc.add(sample, sample.path.stem)
    inproc.enqueue(item)
    inproc.run_burst()
    job = inproc.job(item)
    assert job.status == "done", job.error
    return item, job


def fetch(inproc: InProcess, key: str, tmp_path: Path) -> Path:
    local = tmp_path / "s3" / key
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_bytes(inproc.fake_store.body(key))
    return local


@pytest.mark.parametrize("shape", ["b_frames_aac", "b_frames_ac3_51", "delayed_audio"])
def test_the_mirror_keeps_the_sources_lip_sync_under_both_readings(
    inproc: InProcess, fidelity_sample: Samples, ffmpeg_path: str, tmp_path: Path, shape: str
) -> None:
    assert_lip_sync_kept(inproc, fidelity_sample(shape), ffmpeg_path, tmp_path)


@pytest.mark.parametrize("output_format", ["hls", "mp4"])
def test_lip_sync_holds_when_both_tracks_are_reencoded(
    inproc: InProcess,
    fidelity_sample: Samples,
    ffmpeg_path: str,
    tmp_path: Path,
    output_format: OutputFormat,
) -> None:
    """libx264's own B-frames and AAC's priming, late audio padded. The faststart MP4s of
    MIRROR_OUTPUT_FORMAT=mp4 carry ffmpeg's own edit lists, which every progressive
    player honours (MSE plays fragments only), so they are read with edit lists."""
    inproc.transcode = TranscodeOptions(
        ffmpeg_path=ffmpeg_path,
        video_codec="libx264",
        audio_codec="aac",
        output_format=output_format,
    )
    readings = (False, True) if output_format == "hls" else (True,)
    sample = fidelity_sample("delayed_audio")
    assert_lip_sync_kept(inproc, sample, ffmpeg_path, tmp_path, readings)


def assert_lip_sync_kept(
    inproc: InProcess,
    sample: SampleMedia,
    ffmpeg_path: str,
    tmp_path: Path,
    readings: tuple[bool, ...] = (False, True),
) -> None:
    """The mark's offset is the source's to 25 ms under each reading (edit lists ignored,
    honoured), the flash where it was, and every track as long as the source."""
    item, job = mirror_sample(inproc, sample)
    assert job.audio_keys is not None
    video = fetch(inproc, f"mirror/{item}/video.mp4", tmp_path)
    audio = fetch(inproc, job.audio_keys[0]["key"], tmp_path)

    for edit_lists in readings:
        source = mark_of(sample.path, sample.path, ffmpeg_path, edit_lists=edit_lists)
        mirrored = mark_of(video, audio, ffmpeg_path, edit_lists=edit_lists)
        drift = mirrored.offset_s - source.offset_s
        assert abs(drift) <= SYNC_TOLERANCE_S, (edit_lists, source, mirrored)
        # Every output's timeline starts with the source's: the mark is where it was.
        assert abs(mirrored.flash_s - source.flash_s) <= SYNC_TOLERANCE_S, (edit_lists, mirrored)

    # The tracks last as long as the source (a padded late start included).
    for entry in [job.video or {}, *job.audio_keys]:
        assert abs(entry["duration_s"] - sample.duration_s) <= duration_tolerance(
            sample.duration_s
        ), entry


@pytest.mark.parametrize("shape", ["b_frames_ac3_51", "surround_71"])
def test_surround_becomes_aac_with_channel_configuration_6_and_channels_6(
    inproc: InProcess, fidelity_sample: Samples, tmp_path: Path, shape: str
) -> None:
    item, job = mirror_sample(inproc, fidelity_sample(shape))
    assert job.audio_keys is not None
    entry, stereo = job.audio_keys  # the stereo track made beside it (MIRROR_STEREO_TRACK)
    config = audio_config(read_moov(fetch(inproc, entry["key"], tmp_path)))

    assert config is not None
    assert (config.audio_object_type, config.channel_configuration) == (2, 6)  # AAC LC, 5.1
    assert stereo["key"] == f"mirror/{item}/audio/1-eng-stereo.m4a"
    master = inproc.fake_store.body(f"mirror/{item}/master.m3u8").decode()
    surround, two = [line for line in master.splitlines() if "TYPE=AUDIO" in line]
    assert 'CHANNELS="6"' in surround and "DEFAULT=NO" in surround
    assert 'CHANNELS="2"' in two and "DEFAULT=YES" in two


def test_every_audio_rendition_says_its_channels(
    inproc: InProcess, fidelity_sample: Samples
) -> None:
    """A copied stereo track, not only a folded one, carries CHANNELS."""
    item, job = mirror_sample(inproc, fidelity_sample("b_frames_aac"))
    assert job.audio_keys is not None
    master = inproc.fake_store.body(f"mirror/{item}/master.m3u8").decode()
    renditions = [line for line in master.splitlines() if "TYPE=AUDIO" in line]

    assert len(renditions) == 1 and 'CHANNELS="2"' in renditions[0]
