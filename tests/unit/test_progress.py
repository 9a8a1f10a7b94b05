"""The live status: what it says, where it draws on a terminal, and the lines it writes off one."""

from __future__ import annotations

import io

from pytest_skillcourt.report.progress import CLEAR_EOL, RESTORE, SAVE, Progress, format_tokens, run_label


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def progress(tty: bool, column: int = 20, width: int = 100, heartbeat: float = 30.0):  # type: ignore[no-untyped-def]
    stream, lines, clock = io.StringIO(), [], Clock()
    p = Progress(stream, tty=tty, width=width, column=lambda: column, write_line=lines.append,
                 heartbeat_s=heartbeat, clock=clock, tick_s=3600)
    return p, stream, lines, clock


def test_labels_and_token_counts() -> None:
    assert run_label("skills_tests/house-format.yaml::t2[with]") == "house-format t2[with]"
    assert (format_tokens(999), format_tokens(12_345), format_tokens(2_500_000)) == ("999", "12.3k", "2.5M")


def test_the_status_names_the_oldest_run_in_flight_and_the_totals() -> None:
    p, _, _, clock = progress(tty=True)
    p.started("skills_tests/a.yaml::t1[with]")
    clock.now += 5
    p.started("skills_tests/a.yaml::t1[without]")
    clock.now += 9
    assert p.status() == "a t1[with] 14s +1 more | 0 done | 0 tok | $0.0000"
    p.finished("skills_tests/a.yaml::t1[with]", {"tokens": "1500", "cost_usd": "0.0025", "cached": "false"})
    p.finished("skills_tests/a.yaml::t1[without]", {"tokens": 300, "cost_usd": "", "cached": "true"})
    p.finished("skills_tests/a.yaml::t1[without]", {"tokens": 300})  # a second report of one run: once
    assert p.status() == "2 done (1 cached) | 1.8k tok | $0.0025"
    p.close()


def test_on_a_terminal_it_draws_after_the_cursor_and_erases_before_pytest_writes() -> None:
    p, stream, lines, clock = progress(tty=True)
    p.tick()
    assert stream.getvalue() == ""  # nothing in flight: nothing drawn
    p.started("s/a.yaml::t1[with]")
    clock.now += 61
    p.tick()
    drawn = stream.getvalue()
    assert drawn.startswith(SAVE + "  ~ a t1[with] 1m01s") and drawn.endswith(CLEAR_EOL + RESTORE)
    with p.paused():
        assert stream.getvalue() == drawn + CLEAR_EOL  # erased while pytest writes
    with p.paused():
        assert stream.getvalue() == drawn + CLEAR_EOL  # nothing left to erase
    assert lines == []
    p.close()


def test_it_never_draws_past_the_terminal_width() -> None:
    p, stream, _, _ = progress(tty=True, column=70, width=100)
    p.started("skills_tests/a-very-long-skill-name-indeed.yaml::a-long-task-id[with-r2-gpt-4.1-mini]")
    p.tick()
    text = stream.getvalue()[len(SAVE):-len(CLEAR_EOL + RESTORE)]
    assert len(text) == 100 - 70 - 10 and text.endswith("~")
    p2, stream2, _, _ = progress(tty=True, column=85, width=100)
    p2.started("s/a.yaml::t1[with]")
    p2.tick()
    assert stream2.getvalue() == ""  # no room on this line


def test_off_a_terminal_a_line_every_heartbeat() -> None:
    p, stream, lines, clock = progress(tty=False, heartbeat=30)
    p.started("s/a.yaml::t1[with]")
    clock.now += 10
    p.tick()
    assert lines == []
    clock.now += 25
    p.tick()
    assert lines == ["skill court: running a t1[with] 35s | 0 done | 0 tok | $0.0000"]
    p.tick()
    assert len(lines) == 1 and stream.getvalue() == ""
    p.step("judging 3 pairs")
    assert lines[-1] == "skill court: judging 3 pairs"


def test_a_runs_item_counts_every_run_it_did() -> None:
    """``--skill-court-items skill``: one item stands for its runs in the counts."""
    p, _, _, _ = progress(tty=True)
    p.started("skills_tests/a.yaml::runs[test-model]")
    p.finished("skills_tests/a.yaml::runs[test-model]",
               {"runs": 12, "cached_runs": "10", "tokens": 2400, "cost_usd": "0.001000"})
    assert p.status() == "12 done (10 cached) | 2.4k tok | $0.0010"
    p.close()
