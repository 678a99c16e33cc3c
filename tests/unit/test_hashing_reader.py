"""HashingReader: the SHA-256 of a file from the reads an upload makes, retries included."""

from __future__ import annotations

import hashlib
import io
import os
import random
from pathlib import Path

import pytest
from s3transfer.utils import ReadFileChunk

from mirror.objects import FileDigest
from mirror.s3.checksums import HashingReader, IncompleteDigest

DATA = os.urandom(100_000)
TRUE = FileDigest(len(DATA), hashlib.sha256(DATA).hexdigest())


def _reader(data: bytes = DATA) -> HashingReader:
    return HashingReader(io.BytesIO(data), len(data), "test")


def test_parts_read_in_order_hash_to_the_files_sha256() -> None:
    reader = _reader()
    parts = [reader.read(30_000) for _ in range(4)]

    assert b"".join(parts) == DATA
    assert reader.read(1) == b""
    assert reader.digest() == TRUE


def test_reread_after_seek_back_counts_once() -> None:
    # What botocore does with a PutObject body: read it for the checksum, rewind, read
    # it for the signature, rewind, send it; a retry rewinds once more.
    reader = _reader()
    for _ in range(3):
        reader.seek(0)
        assert reader.read() == DATA
    assert reader.digest() == TRUE


def test_retried_part_that_failed_halfway_counts_once() -> None:
    reader = _reader()
    reader.read(40_000)
    reader.seek(20_000)  # a part from 20_000 on is sent again
    reader.read(5_000)  # and drops again, before the hashed end
    reader.seek(20_000)
    assert reader.read() == DATA[20_000:]
    assert reader.digest() == TRUE


def test_read_overlapping_the_hashed_end_adds_only_the_new_bytes() -> None:
    reader = _reader()
    reader.read(10_000)
    reader.seek(5_000)
    reader.read(10_000)  # 5_000 old bytes, 5_000 new ones
    reader.read()
    assert reader.digest() == TRUE


def test_skipped_bytes_leave_no_digest() -> None:
    reader = _reader()
    reader.read(10_000)
    reader.seek(20_000)
    reader.read()

    with pytest.raises(IncompleteDigest, match="only bytes 0-10000 of 100000"):
        reader.digest()


def test_skipped_bytes_read_later_complete_the_digest() -> None:
    reader = _reader()
    reader.seek(50_000)
    reader.read()  # beyond the hashed end: not hashed
    reader.seek(0)
    reader.read()
    assert reader.digest() == TRUE


def test_unfinished_read_leaves_no_digest() -> None:
    reader = _reader()
    reader.read(99_999)
    with pytest.raises(IncompleteDigest):
        reader.digest()


def test_empty_file_has_the_empty_sha256() -> None:
    reader = _reader(b"")
    assert reader.read() == b""
    assert reader.digest() == FileDigest(0, hashlib.sha256(b"").hexdigest())


@pytest.mark.parametrize("seed", range(20))
def test_any_retry_pattern_that_reaches_the_end_gives_the_true_digest(seed: int) -> None:
    """Random rewinds to anywhere already read, random read sizes, until the end."""
    rng = random.Random(seed)
    reader = _reader()
    furthest = 0
    while furthest < len(DATA):
        if rng.random() < 0.3:
            reader.seek(rng.randrange(0, furthest + 1))
        data = reader.read(rng.randrange(1, 20_000))
        furthest = max(furthest, reader.tell())
        assert data == DATA[reader.tell() - len(data) : reader.tell()]
    assert reader.digest() == TRUE


def test_s3transfer_chunk_reader_on_top_reads_through_it(tmp_path: Path) -> None:
    """PutObject of a file object: s3transfer wraps it in a ReadFileChunk."""
    path = tmp_path / "audio.m4a"
    path.write_bytes(DATA)
    with HashingReader.open(path) as reader:
        chunk = ReadFileChunk(reader, len(DATA), len(DATA))  # type: ignore[arg-type]
        assert chunk.read() == DATA
        chunk.seek(0)  # a retry
        assert chunk.read(8192) == DATA[:8192]
        assert reader.digest() == TRUE
    assert reader.closed


def test_open_records_the_size_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "video.mp4"
    path.write_bytes(DATA)
    with HashingReader.open(path) as reader:
        assert reader.size == len(DATA)
        assert reader.name == str(path)
