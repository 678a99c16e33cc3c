"""An MP4 audio track's decoder setup, read from its `esds` box (ISO 14496-1 / 14496-3).

Browsers decode AAC from what the AudioSpecificConfig says before the first frame; a
multichannel track whose channel configuration is 0 (the layout in a program config
element instead) stops hls.js, Shaka and video.js with an audio SourceBuffer error.
Verification reads it from each `.m4a` mirror wrote; the playlists take the channel
count from it. Pure parsing, except `read_moov`, which reads the box from a file.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mirror.domain.errors import PermanentError

# No moov mirror writes comes near this; a larger one is not ours.
_MAX_MOOV_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class AudioConfig:
    """The start of an AAC AudioSpecificConfig (ISO 14496-3 1.6.2.1): what a decoder is
    set up with before the first frame. `channel_configuration` 0 means the layout is
    in a program config element instead, which browsers' AAC decoders refuse."""

    audio_object_type: int  # 2: AAC LC
    channel_configuration: int

    @classmethod
    def parse(cls, config: bytes) -> AudioConfig:
        bits = int.from_bytes(config[:6].ljust(6, b"\0"), "big")
        position = 48

        def take(count: int) -> int:
            nonlocal position
            position -= count
            return (bits >> position) & ((1 << count) - 1)

        audio_object_type = take(5)
        if audio_object_type == 31:
            audio_object_type = 32 + take(6)
        if take(4) == 0x0F:  # sampling frequency index 15: an explicit 24-bit rate
            take(24)
        return cls(audio_object_type, take(4))

    @property
    def channels(self) -> int | None:
        """The channel count of the configuration (None for 0: the PCE says)."""
        return _CONFIGURATION_CHANNELS.get(self.channel_configuration)


# ISO 14496-3 table 1.19 (with the 2009 and 2013 additions 11-14).
_CONFIGURATION_CHANNELS = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 8, 11: 7, 12: 8, 13: 24, 14: 8}


def audio_config(moov: bytes) -> AudioConfig | None:
    """The AudioSpecificConfig of a one-track moov's esds, None when it has none."""
    esds = moov.find(b"esds")
    if esds < 0:
        return None
    _object_type, config = decoder_config(moov[esds + 8 :])
    return AudioConfig.parse(config) if config else None


def channels(moov: bytes) -> int | None:
    """An audio track's channel count: its AAC configuration's, else the sample entry's
    (AudioSampleEntry.channelcount, ISO 14496-12 12.2.3); None for video."""
    config = audio_config(moov)
    if config is not None and config.channels is not None:
        return config.channels
    entry = moov.find(b"mp4a")
    if entry < 0:
        return None
    # After the type: 6 reserved bytes, data_reference_index, 8 reserved bytes.
    count: int = struct.unpack_from(">H", moov, entry + 4 + 16)[0]
    return count or None


def read_moov(path: Path) -> bytes:
    """The moov box of an MP4 mirror wrote (it comes before any media data)."""
    with path.open("rb") as file:
        offset, end = 0, os.fstat(file.fileno()).st_size
        while offset + 8 <= end:
            file.seek(offset)
            size, kind = struct.unpack(">I4s", file.read(8))
            if size == 1:  # 64-bit size follows the type
                (size,) = struct.unpack(">Q", file.read(8))
            if size < 8 or offset + size > end:
                break
            if kind == b"moov" and size <= _MAX_MOOV_BYTES:
                file.seek(offset)
                return file.read(size)
            if kind in (b"mdat", b"moof"):
                break
            offset += size
    raise PermanentError(f"{path.name} has no moov before its media data")


def decoder_config(payload: bytes) -> tuple[int | None, bytes | None]:
    """(object type, AudioSpecificConfig bytes) from an ES descriptor (ISO 14496-1)."""
    position = 0
    object_type: int | None = None
    while position < len(payload):
        tag = payload[position]
        position += 1
        length = 0
        for _ in range(4):  # "expandable" size: 7 bits a byte, high bit continues
            byte = payload[position]
            position += 1
            length = (length << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        if tag == 0x03:  # ES_Descriptor: ES_ID, flags, then nested descriptors
            flags = payload[position + 2]
            position += 3
            position += 2 if flags & 0x80 else 0
            position += 1 + payload[position] if flags & 0x40 else 0
            position += 2 if flags & 0x20 else 0
        elif tag == 0x04:  # DecoderConfigDescriptor
            object_type = payload[position]
            position += 13
        elif tag == 0x05 and object_type is not None:  # DecoderSpecificInfo
            return object_type, payload[position : position + length]
        else:
            position += length
    return object_type, None
