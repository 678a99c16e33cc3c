"""Which H.264 encoder re-encodes the video, and its ffmpeg options: one function for all.

`encoder_options(encoder, quality, filters)` is the only place that knows an encoder's
flags. `quality` speaks x264's language (MIRROR_X264_PRESET / MIRROR_X264_CRF, optionally
a bitrate cap such as a rendition's maxrate); each hardware encoder gets the settings
that aim at the same picture, chosen as follows (no GPU was available to measure them:
starting points, README: Hardware encoders):
- libx264: the preset and CRF as given (veryfast / 23 by default); a cap makes it capped
  CRF (`-maxrate` + `-bufsize`), as streaming services use it.
- h264_nvenc: constant quality (`-rc vbr -cq <crf> -b:v 0`) on the same 0-51 quantizer
  scale as CRF, with the features that close most of the gap to x264 (spatial adaptive
  quantisation, a 20-frame look-ahead, B-frames), at preset p4 for veryfast: NVIDIA's
  P1-P7 run from fastest to best, P4 being their default balance (NVENC Preset
  Migration Guide), which published comparisons put near x264's veryfast to fast for
  Turing and later GPUs at equal bitrates.
- h264_qsv: intelligent constant quality (`-global_quality <crf>`, Intel's CRF analogue,
  same scale) with the x264 preset name, which QSV's target usages share (veryfast..veryslow).
- h264_vaapi: `-global_quality <crf>`: ffmpeg gives it to the driver as ICQ where it has
  one (Intel's iHD), else as the constant QP (Mesa's radeonsi), so a driver without a
  quality mode still encodes; B-frames as x264 uses them (`-bf 3`).
Key frames: the ones the command forces (every fragment's start, aligned across
renditions) must be IDR frames, so each HLS segment decodes on its own; libx264 and
VAAPI make a forced key frame an IDR by themselves, NVENC and QSV are told to
(`-forced-idr 1`, `-forced_idr 1`).
Hardware encoders lack x264's macroblock tree, so the same quantizer spends somewhat more
bits: the CRF setting stays the one quality knob for every encoder.

Frames: the picture filters (mirror.transcode.picture) run in software on every path,
so deinterlacing, square pixels and tone-mapping are the same whatever encodes; what
differs is the hand-over. libx264 and NVENC take `yuv420p` frames from memory (NVENC
uploads them itself), QSV takes `nv12` from memory, VAAPI needs its frames on the device:
`format=nv12,hwupload` ends the chain and `-vaapi_device` opens the render node before
the input. A rendition's scale (several outputs) goes before the hand-over, in software.
Pure: names and numbers in, ffmpeg options out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

VideoEncoder = Literal["libx264", "h264_vaapi", "h264_qsv", "h264_nvenc"]
# MIRROR_VIDEO_ENCODER: `auto` probes the hardware at worker start (mirror.transcode.encoder_probe).
VideoEncoderSetting = Literal["auto", "libx264", "h264_vaapi", "h264_qsv", "h264_nvenc"]
HARDWARE_ENCODERS: tuple[VideoEncoder, ...] = ("h264_nvenc", "h264_qsv", "h264_vaapi")
SOFTWARE_ENCODER: VideoEncoder = "libx264"
DEFAULT_VAAPI_DEVICE = "/dev/dri/renderD128"

# x264 preset -> NVENC preset (p1 fastest .. p7 best), by the quality each aims at.
_NVENC_PRESETS = {
    "ultrafast": "p1",
    "superfast": "p2",
    "veryfast": "p4",
    "faster": "p4",
    "fast": "p5",
    "medium": "p5",
    "slow": "p6",
    "slower": "p7",
    "veryslow": "p7",
}
# QSV's target usages share x264's names except the two fastest.
_QSV_PRESETS = {"ultrafast": "veryfast", "superfast": "veryfast"}
_B_FRAMES = 3  # x264 veryfast's


@dataclass(frozen=True, slots=True)
class VideoQuality:
    """What a re-encode aims at, in x264's terms; `max_bitrate` (bits/s) caps it, with a
    VBV buffer of `buffer_s` seconds at that rate (a rendition's maxrate)."""

    preset: str = "veryfast"
    crf: int = 23
    max_bitrate: int | None = None
    buffer_s: float = 2.0

    @property
    def buffer_bits(self) -> int | None:
        return None if self.max_bitrate is None else int(self.max_bitrate * self.buffer_s)


@dataclass(frozen=True, slots=True)
class EncoderOptions:
    """An encoder's part of the command: options before the input (a device to open), the
    video output's options (`c:v`, quality, pixel format) and its filter chain: the
    picture filters given, then the hand-over to the encoder. A plain output takes the
    chain as `-vf` (`output_with_filters`); outputs fed by a `-filter_complex` (a `split`
    into renditions) end their branch of the graph with it instead."""

    global_options: tuple[str, ...] = ()
    output: dict[str, Any] = field(default_factory=dict)
    filters: tuple[str, ...] = ()

    def output_with_filters(self) -> dict[str, Any]:
        """`output` plus the chain as `vf` (when there is one)."""
        return {**self.output, "vf": ",".join(self.filters)} if self.filters else dict(self.output)


def encoder_options(
    encoder: VideoEncoder,
    quality: VideoQuality,
    filters: Sequence[str] = (),
    *,
    device: str | None = None,
) -> EncoderOptions:
    """The options that make `encoder` write `filters`' frames as H.264 at `quality`;
    `device`: the VAAPI render node (default DEFAULT_VAAPI_DEVICE)."""
    chain = list(filters)
    cap = quality.max_bitrate
    output: dict[str, Any] = {"c:v": encoder}
    global_options: tuple[str, ...] = ()
    if encoder == "libx264":
        output.update({"preset": quality.preset, "crf": quality.crf, "pix_fmt": "yuv420p"})
        if cap is not None:
            output.update({"maxrate": cap, "bufsize": quality.buffer_bits})
    elif encoder == "h264_nvenc":
        output.update(
            {
                "preset": _NVENC_PRESETS.get(quality.preset, "p4"),
                "tune": "hq",
                "rc": "vbr",
                "cq": quality.crf,
                "b:v": "0",
                "spatial-aq": "1",
                "rc-lookahead": "20",
                "bf": _B_FRAMES,
                "forced-idr": "1",
                "profile:v": "high",
                "pix_fmt": "yuv420p",
            }
        )
        if cap is not None:
            output.update({"maxrate": cap, "bufsize": quality.buffer_bits})
    elif encoder == "h264_qsv":
        chain.append("format=nv12")
        output.update(
            {
                "preset": _QSV_PRESETS.get(quality.preset, quality.preset),
                "global_quality": quality.crf,
                "bf": _B_FRAMES,
                "forced_idr": "1",
                "profile:v": "high",
            }
        )
        if cap is not None:  # quality-defined VBR, kept under the cap
            output.update({"b:v": cap * 3 // 4, "maxrate": cap, "bufsize": quality.buffer_bits})
    else:  # h264_vaapi
        chain += ["format=nv12", "hwupload"]
        global_options = ("-vaapi_device", device or DEFAULT_VAAPI_DEVICE)
        output.update({"bf": _B_FRAMES, "profile:v": "high"})
        if cap is None:
            output["global_quality"] = quality.crf
        else:  # VBR every driver has (QVBR is Intel's alone)
            output.update(
                {
                    "rc_mode": "VBR",
                    "b:v": cap * 3 // 4,
                    "maxrate": cap,
                    "bufsize": quality.buffer_bits,
                }
            )
    return EncoderOptions(global_options=global_options, output=output, filters=tuple(chain))
