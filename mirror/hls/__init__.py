"""HLS packaging: playlists with byte ranges into mirror's fragmented MP4 outputs.

`fragments` reads a file's own fragment index, `playlists` renders text (both pure but
for one read of a file's head), `timestamp_map` puts the subtitles on the video's clock,
`package` writes an item's playlists (and maps its subtitles) before upload.
"""

from mirror.hls.package import (
    MASTER_FILE_NAME,
    HlsPackage,
    PlaylistFile,
    package_hls,
)

__all__ = ["MASTER_FILE_NAME", "HlsPackage", "PlaylistFile", "package_hls"]
