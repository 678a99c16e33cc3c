"""The per-part checksum that S3 itself checks before it stores a part.

With it, a part damaged between the file and S3 is refused, not stored; the SHA-256 of
each whole file (on the job row and in the manifest) comes from the very bytes the
streaming upload read (`mirror.s3.streaming`).
"""

from __future__ import annotations

from typing import Literal

# What every part carries (`x-amz-checksum-crc32`) and S3 checks before it stores the
# part. CRC32 is what botocore (since 1.36) sends by default, so AWS, MinIO and moto
# take it, as must any S3 look-alike that works with current AWS SDKs; it costs next to
# nothing (zlib); CRC32C and CRC64NVME would need awscrt, which is not installed.
# Set explicitly, it stays on whatever AWS_REQUEST_CHECKSUM_CALCULATION says.
PART_CHECKSUM_ALGORITHM: Literal["CRC32"] = "CRC32"
