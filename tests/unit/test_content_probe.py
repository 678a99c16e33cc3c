"""The content probe: the same bytes at both ends give the same probe, locally and by Range."""

from __future__ import annotations

from pathlib import Path

from mirror.domain.errors import TransientError
from mirror.files.content_probe import PROBE_BYTES, content_probe_of_file, content_probe_of_item


class Ranges:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked: list[tuple[int, int]] = []

    def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None:
        self.asked.append((start, length))
        return self.data[start : start + length]


def test_local_and_ranged_probes_agree_and_read_only_the_ends(tmp_path: Path) -> None:
    data = bytes(range(256)) * (3 * PROBE_BYTES // 256)
    path = tmp_path / "f"
    path.write_bytes(data)
    ranges = Ranges(data)
    assert content_probe_of_item(ranges, "a" * 32, len(data)) == content_probe_of_file(
        path, len(data)
    )
    assert ranges.asked == [(0, PROBE_BYTES), (len(data) - PROBE_BYTES, PROBE_BYTES)]


def test_a_change_in_the_middle_is_not_seen_but_one_at_an_end_is(tmp_path: Path) -> None:
    data = bytearray(b"\0" * (3 * PROBE_BYTES))
    path = tmp_path / "f"
    path.write_bytes(data)
    first = content_probe_of_file(path, len(data))
    data[len(data) // 2] = 1
    path.write_bytes(data)
    assert content_probe_of_file(path, len(data)) == first  # the probe is cheap, not a hash
    data[-1] = 1
    path.write_bytes(data)
    assert content_probe_of_file(path, len(data)) != first


def test_a_small_file_is_probed_whole_and_an_unanswered_range_is_no_probe(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"tiny")
    assert content_probe_of_item(Ranges(b"tiny"), "a" * 32, 4) == content_probe_of_file(path, 4)

    class Refuses(Ranges):
        def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None:
            return None

    assert content_probe_of_item(Refuses(b"tiny"), "a" * 32, 4) is None

    class Fails(Ranges):
        def fetch_range(self, item_id: str, start: int, length: int) -> bytes | None:
            raise TransientError("Jellyfin answered 500")

    assert content_probe_of_item(Fails(b"tiny"), "a" * 32, 4) is None
