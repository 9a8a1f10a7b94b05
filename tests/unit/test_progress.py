"""The live status: what it says, where it draws on a terminal, the lines it writes off one, and
that it reaches the terminal past pytest's capture of the process's output."""

from __future__ import annotations

import io
import os
import tempfile
import time
from types import SimpleNamespace

from pytest_skillcourt.plugin.progress import CLEAR_EOL, RESTORE, SAVE, Progress, PytestTerminal, format_tokens, \
    plain, run_label


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeTerminal:
    """pytest's terminal as :class:`Progress` sees it: ``line`` is what pytest has on its
    current line, ``out`` all that was written, pytest's writes too (:meth:`pytest_writes`)."""

    def __init__(self, tty: bool, width: int, line: str) -> None:
        self.tty, self.width, self.line = tty, width, line
        self.out = io.StringIO()
        self.closed = False

    def column(self) -> int:
        return len(self.line)

    def current_line(self) -> str:
        return self.line

    def write(self, text: str) -> None:
        self.out.write(text)

    def pytest_writes(self, text: str) -> None:
        self.out.write(text)
        self.line = text.rsplit("\n", 1)[-1] if "\n" in text else self.line + text

    def sync(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def getvalue(self) -> str:
        return self.out.getvalue()


def progress(tty: bool, column: int = 20, width: int = 100, heartbeat: float = 30.0):  # type: ignore[no-untyped-def]
    term, clock = FakeTerminal(tty, width, "x" * column), Clock()
    p = Progress(term, heartbeat_s=heartbeat, clock=clock, tick_s=3600)
    return p, term, clock


def lines_of(term: FakeTerminal) -> list[str]:
    return [line for line in term.getvalue().split("\n")[1:] if line.startswith("skill court:")]


def test_labels_and_token_counts() -> None:
    assert run_label("skills_tests/house-format.yaml::t2[with]") == "house-format t2[with]"
    assert (format_tokens(999), format_tokens(12_345), format_tokens(2_500_000)) == ("999", "12.3k", "2.5M")


def test_the_status_names_the_oldest_run_in_flight_and_the_totals() -> None:
    p, _, clock = progress(tty=True)
    p.started("skills_tests/a.yaml::t1[with]")
    clock.now += 5
    p.started("skills_tests/a.yaml::t1[without]")
    clock.now += 9
    assert p.status() == "a t1[with] 14s +1 more | 0 done | 0 tok | $0.0000"
    p.finished("skills_tests/a.yaml::t1[with]", tokens=1500, spend=0.0025)
    p.finished("skills_tests/a.yaml::t1[without]", tokens=300, cached=1)
    p.finished("skills_tests/a.yaml::t1[without]", tokens=300)  # a second report of one run: once
    assert p.status() == "2 done (1 cached) | 1.8k tok | $0.0025"
    p.close()


def test_on_a_terminal_it_draws_after_the_cursor_and_erases_before_pytest_writes() -> None:
    p, term, clock = progress(tty=True)
    p.tick()
    assert term.getvalue() == ""  # nothing in flight: nothing drawn
    p.started("s/a.yaml::t1[with]")
    clock.now += 61
    p.tick()
    drawn = term.getvalue()
    assert drawn.startswith(SAVE + "  ~ a t1[with] 1m01s") and drawn.endswith(CLEAR_EOL + RESTORE)
    with p.paused():
        assert term.getvalue() == drawn + CLEAR_EOL  # erased while pytest writes
    with p.paused():
        assert term.getvalue() == drawn + CLEAR_EOL  # nothing left to erase
    assert "\n" not in term.getvalue()  # a terminal gets no lines while runs go on
    p.close()
    assert term.closed


def test_it_never_draws_past_the_terminal_width() -> None:
    p, term, _ = progress(tty=True, column=70, width=100)
    p.started("skills_tests/a-very-long-skill-name-indeed.yaml::a-long-task-id[with-r2-gpt-4.1-mini]")
    p.tick()
    text = term.getvalue()[len(SAVE):-len(CLEAR_EOL + RESTORE)]
    assert len(text) == 100 - 70 - 10 and text.endswith("~")
    p2, term2, _ = progress(tty=True, column=85, width=100)
    p2.started("s/a.yaml::t1[with]")
    p2.tick()
    assert term2.getvalue() == ""  # no room on this line
    p.close()
    p2.close()


def test_off_a_terminal_a_line_every_heartbeat() -> None:
    p, term, clock = progress(tty=False, heartbeat=30, column=0)
    p.started("s/a.yaml::t1[with]")
    clock.now += 10
    p.tick()
    assert term.getvalue() == ""
    clock.now += 25
    p.tick()
    assert term.getvalue() == "skill court: running a t1[with] 35s | 0 done | 0 tok | $0.0000\n"
    p.tick()
    assert term.getvalue().count("\n") == 1  # the next one a heartbeat later
    p.step("judging 3 pairs")
    assert term.getvalue().endswith("\nskill court: judging 3 pairs\n")
    p.close()


def test_a_heartbeat_line_fits_the_width_and_is_plain() -> None:
    p, term, clock = progress(tty=False, heartbeat=1, column=0, width=60)
    p.started("skills_tests/a-very-long-skill-name-indeed.yaml::a-long-task-id[with-r2-gpt-4.1-mini]")
    clock.now += 5
    p.tick()
    line = term.getvalue()
    assert line.endswith("~\n") and len(line) == 61, line
    assert "\r" not in line and "\x1b" not in line
    p.close()


def test_a_line_after_pytest_began_its_line_ends_it_and_pytest_line_is_written_again() -> None:
    """Off a terminal pytest's line (``path ..``) is ended before a heartbeat, and written
    again before pytest writes on: its next letter lands after its own, never alone."""
    p, term, clock = progress(tty=False, heartbeat=1, column=0)
    term.pytest_writes("\nskills_tests/a.yaml ..")
    p.started("skills_tests/a.yaml::t3[with]")
    for _ in range(2):
        clock.now += 1
        p.tick()
    with p.paused():
        term.pytest_writes(".")
    assert term.getvalue() == ("\nskills_tests/a.yaml ..\n"
                               "skill court: running a t3[with] 1s | 0 done | 0 tok | $0.0000\n"
                               "skill court: running a t3[with] 2s | 0 done | 0 tok | $0.0000\n"
                               "skills_tests/a.yaml ...")
    with p.paused():  # nothing of ours in between: nothing written again
        term.pytest_writes(".")
    assert term.getvalue().endswith("\nskills_tests/a.yaml ....")
    p.close()


def test_text_from_suites_and_models_loses_its_control_characters() -> None:
    assert plain("a\x1b[2Jb\x1b]0;title\x07c\rd\ne\tf\x00g\x9bh\u202ei") == "abc d e f g h i"
    assert plain("a\x1b[2J\nb\rc", keep_newlines=True) == "a\nb c"
    assert plain(42) == "42"
    p, term, clock = progress(tty=True, column=0)
    p.started("skills_tests/evil.yaml::t1\x1b[31m\r\x07[with]")
    clock.now += 3
    p.tick()
    p.step("judging with \x1b]0;owned\x07model\x1b[2J\r\nnext")
    drawn = term.getvalue()
    assert "evil t1  [with] 3s" in drawn and "skill court: judging with model  next\n" in drawn, repr(drawn)
    assert not any(c in drawn.replace(SAVE, "").replace(RESTORE, "").replace(CLEAR_EOL, "")
                   for c in "\x1b\r\x07\x00")
    p.close()


def test_a_runs_item_counts_every_run_it_did() -> None:
    """``--skill-court-items skill``: one item stands for its runs in the counts."""
    p, _, _ = progress(tty=True)
    p.started("skills_tests/a.yaml::runs[test-model]")
    p.finished("skills_tests/a.yaml::runs[test-model]", runs=12, cached=10, tokens=2400, spend=0.001)
    assert p.status() == "12 done (10 cached) | 2.4k tok | $0.0010"
    p.close()


def test_the_thread_waits_between_ticks() -> None:
    """No busy wait: the thread draws once per ``tick_s`` while a run is in flight."""
    term = FakeTerminal(tty=True, width=100, line="")
    p = Progress(term, heartbeat_s=1, tick_s=0.05)
    ticks: list[float] = []
    real_tick = p.tick

    def counted() -> None:
        ticks.append(time.monotonic())
        real_tick()

    p.tick = counted  # type: ignore[method-assign]
    p.started("s/a.yaml::t1[with]")
    time.sleep(0.5)
    p.close()
    assert 2 <= len(ticks) <= 11, len(ticks)  # a busy wait would tick thousands of times
    assert p._thread is not None and not p._thread.is_alive()


def test_the_pytest_terminal_writes_past_a_capture_of_its_descriptor() -> None:
    """pytest's ``--capture=fd`` points the stream's descriptor at a temporary file while
    an item runs; what progress writes still reaches what the descriptor was at the start."""
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w", encoding="utf-8")
    tw = SimpleNamespace(_file=stream, fullwidth=80, width_of_current_line=4, _current_line="a.py")
    suspended = []

    class Capman:
        def global_and_fixture_disabled(self):  # type: ignore[no-untyped-def]
            import contextlib

            suspended.append(True)
            return contextlib.nullcontext()

    term = PytestTerminal(SimpleNamespace(_tw=tw, isatty=lambda: False), Capman())
    assert suspended and (term.tty, term.width, term.column(), term.current_line()) == (False, 80, 4, "a.py")
    saved = os.dup(write_end)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), write_end)  # what FDCapture does while an item runs
        try:
            term.write("skill court: running \u2026\n")
            stream.write("the item's own output\n")
            stream.flush()
        finally:
            os.dup2(saved, write_end)
            os.close(saved)
        capture.seek(0)
        assert capture.read() == b"the item's own output\n"
    term.close()
    stream.close()
    with os.fdopen(read_end, "rb") as got:
        assert got.read() == "skill court: running \u2026\n".encode()


def test_a_stream_without_a_descriptor_is_written_as_it_is() -> None:
    stream = io.StringIO()
    tw = SimpleNamespace(_file=stream, fullwidth=80, width_of_current_line=0, _current_line="")
    term = PytestTerminal(SimpleNamespace(_tw=tw, isatty=False), None)
    term.write("x\n")
    term.close()
    assert stream.getvalue() == "x\n" and term.tty is False


def test_a_broken_terminal_ends_the_progress_not_the_session() -> None:
    class Broken(FakeTerminal):
        def write(self, text: str) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    term, clock = Broken(tty=False, width=80, line="a.py ."), Clock()
    p = Progress(term, heartbeat_s=1, clock=clock, tick_s=3600)
    p.started("s/a.yaml::t1[with]")
    clock.now += 2
    p.tick()  # raises nothing
    with p.paused():
        pass
    p.step("judging 1 pair")
    p.close()
