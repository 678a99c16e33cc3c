"""OverlappedPhases: the heartbeat shows the earliest unfinished phase, percent never
goes back, whatever order the overlapping phases report in."""

from __future__ import annotations

from mirror.domain.progress import Progress
from mirror.pipeline.phases import OverlappedPhases


def _bytes(phase: str, done: int, total: int = 100) -> Progress:
    return Progress(phase=phase, bytes_done=done, bytes_total=total)  # type: ignore[arg-type]


def test_later_phases_reporting_first_show_only_when_their_turn_comes() -> None:
    shown: list[Progress] = []
    phases = OverlappedPhases(shown.append)
    phases(_bytes("upload", 90))  # the upload and transcode report before the download
    phases(_bytes("transcode", 80))
    assert shown == []
    phases(_bytes("download", 10))
    phases(_bytes("upload", 95))
    phases(_bytes("download", 60))
    assert [(p.phase, p.percent) for p in shown] == [("download", 10.0), ("download", 60.0)]
    assert phases.current == "download"

    phases.finished("download")
    assert str(phases.current) == "transcode"
    assert (shown[-1].phase, shown[-1].percent) == ("transcode", 80.0)
    phases.finished("transcode")
    assert (shown[-1].phase, shown[-1].percent) == ("upload", 95.0)


def test_percent_never_goes_back_within_the_shown_phase() -> None:
    shown: list[Progress] = []
    phases = OverlappedPhases(shown.append)
    for done in (5, 30, 70):
        phases(_bytes("transcode", done))  # ahead of the download: kept, not shown
        phases(_bytes("download", done + 10))
    phases.finished("download")
    phases(_bytes("upload", 99))
    phases(_bytes("transcode", 100))
    phases.finished("transcode")
    order = {"download": 0, "transcode": 1, "upload": 2}
    steps = [(order[p.phase], p.percent or 0.0) for p in shown]
    assert steps == sorted(steps), steps  # phases in order, percent rising within each
    assert [p.phase for p in shown][-1] == "upload"


def test_a_phase_finished_before_any_report_moves_straight_on() -> None:
    shown: list[Progress] = []
    phases = OverlappedPhases(shown.append)
    phases.finished("download")  # e.g. nothing left to download on a resumed attempt
    assert shown == []
    phases(_bytes("transcode", 40))
    assert [(p.phase, p.percent) for p in shown] == [("transcode", 40.0)]


def test_a_phase_not_shown_that_moves_is_told_as_movement_only() -> None:
    shown: list[Progress] = []
    movements: list[None] = []
    phases = OverlappedPhases(shown.append, moved=lambda: movements.append(None))
    phases(_bytes("download", 10))
    phases(_bytes("upload", 20))
    phases(_bytes("transcode", 30))
    assert [p.phase for p in shown] == ["download"]
    assert len(movements) == 2
