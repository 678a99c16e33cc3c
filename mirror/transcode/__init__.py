"""ffmpeg: plan the outputs from the item's streams, build one command, run it.

`plan` and `progress` are pure (plain data in, plain data out); `command` builds the
argv with ffmpeg-python; `process` and `runner` own the child process.
"""

from mirror.transcode.binary import find_ffmpeg
from mirror.transcode.command import build_command
from mirror.transcode.plan import (
    AUDIO_CODEC_SETTINGS,
    VIDEO_CODEC_SETTINGS,
    AudioCodecSetting,
    AudioOutput,
    TranscodePlan,
    VideoCodecSetting,
    VideoOutput,
    plan_transcode,
)
from mirror.transcode.progress import FfmpegProgressParser
from mirror.transcode.runner import run_transcode

__all__ = [
    "AUDIO_CODEC_SETTINGS",
    "VIDEO_CODEC_SETTINGS",
    "AudioCodecSetting",
    "AudioOutput",
    "FfmpegProgressParser",
    "TranscodePlan",
    "VideoCodecSetting",
    "VideoOutput",
    "build_command",
    "find_ffmpeg",
    "plan_transcode",
    "run_transcode",
]
