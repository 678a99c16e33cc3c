"""Issue 19's "What done means", shape by shape: one table, every check on every shape.

Each shape of the corpus (tests/fixtures/shape_corpus.py: the fidelity samples and the
picture samples, each with the sync mark and an audio track) is mirrored through the
real pipeline with auto codecs, and what landed in the store must:
- decode (video and every audio track, no error from ffmpeg);
- keep the source's lip sync: the flash's lag behind the beep is the source's to 25 ms,
  read as MSE players read the files (edit lists ignored) and as ffmpeg / Safari do;
- last as long as the source (every track);
- be SDR tagged BT.709 when re-encoded (a copy keeps its own tags, and its VIDEO-RANGE);
- be progressive (idet finds no interlaced frames, or none more than in a progressive
  source);
- be listed in master.m3u8 with the displayed RESOLUTION, FRAME-RATE and each audio
  rendition's CHANNELS.
What is particular to a shape (the tone-map's brightness, the deinterlace of the
source's combing, AAC's channel configuration) stays in the shape's own tests; the
replaced-between-attempts source is tests/fidelity/test_resume_never_splices.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from mirror.transcode.audio_config import audio_config, read_moov
from mirror.transcode.probe import probe_file
from mirror.transcode.verify import duration_tolerance
from tests.fidelity.av_sync import mark_of
from tests.fidelity.test_av_sync import SYNC_TOLERANCE_S
from tests.fidelity.test_picture_fidelity import assert_decodes, interlaced_share
from tests.fixtures.shape_corpus import SHAPES, MirroredShape

Mirrored = Callable[[str], MirroredShape]


def attributes(line: str) -> dict[str, str]:
    """An HLS tag's attribute list, quotes removed."""
    pairs = re.findall(r'([A-Z-]+)=("[^"]*"|[^,]*)', line.split(":", 1)[1])
    return {name: value.strip('"') for name, value in pairs}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_is_mirrored_faithfully(
    mirrored_shape: Mirrored, ffmpeg_path: str, shape: str
) -> None:
    expected = SHAPES[shape]
    out = mirrored_shape(shape)
    assert out.status == "done", out.error
    sample = out.sample
    video = out.path(out.video["key"])
    audio = [out.path(entry["key"]) for entry in out.audio]

    # Decodes.
    for path in [video, *audio]:
        assert_decodes(ffmpeg_path, path)

    # Lip sync, under both readings of the outputs. The source is read as a player reads
    # a whole file: a plain MP4's edit list (B-frames' delay) honoured.
    source = mark_of(sample.path, sample.path, ffmpeg_path, edit_lists=True)
    # Every track: a stereo track beside a 5.1 one is made from the same decode.
    for edit_lists in (False, True):
        for track in audio:
            mirrored = mark_of(video, track, ffmpeg_path, edit_lists=edit_lists)
            drift = mirrored.offset_s - source.offset_s
            assert abs(drift) <= SYNC_TOLERANCE_S, (edit_lists, track.name, source, mirrored)

    # Durations.
    for entry in [out.video, *out.audio]:
        assert abs(entry["duration_s"] - sample.duration_s) <= duration_tolerance(
            sample.duration_s
        ), entry

    # Copied or re-encoded as planned; a re-encode is SDR BT.709.
    (probed,) = probe_file(video, ffmpeg_path).streams
    source_codec = sample.streams[0].codec
    if expected.video == "copy":
        assert probed.codec == source_codec
    else:
        assert probed.codec == "h264"
        picture = probed.picture
        assert (picture.matrix, picture.primaries, picture.transfer) == ("bt709",) * 3

    # Progressive: an interlaced source's combing is gone; a progressive one reads no
    # more combed than the source (idet takes some frames of testsrc2's fine lines for
    # interlaced: 16 % of the odd-sized sample's, 60 % of the anamorphic one's).
    source_streams = probe_file(sample.path, ffmpeg_path).streams
    (source_video, *_) = [stream for stream in source_streams if stream.type == "Video"]
    interlaced = source_video.picture.field_order not in (None, "progressive")
    share = interlaced_share(ffmpeg_path, video)
    if interlaced:
        assert share < 0.1, share
    else:
        assert share <= interlaced_share(ffmpeg_path, sample.path) + 0.05, share

    # The master.
    master = out.master.splitlines()
    (stream_inf,) = [attributes(line) for line in master if line.startswith("#EXT-X-STREAM-INF")]
    width, height = expected.displayed
    assert stream_inf["RESOLUTION"] == f"{width}x{height}"
    assert stream_inf["FRAME-RATE"] == expected.frame_rate
    assert "VIDEO-RANGE" not in stream_inf or expected.video == "copy"
    renditions = [attributes(line) for line in master if "TYPE=AUDIO" in line]
    assert tuple(r.get("CHANNELS") for r in renditions) == expected.channels
    # More than two channels: AAC configuration 6 (5.1), never 0 with a PCE.
    for path, channels in zip(audio, expected.channels, strict=True):
        config = audio_config(read_moov(path))
        assert config is not None
        assert config.channel_configuration == int(channels)
