"""``stats.verdict.unreachable``: a selection that can never give HELPS or HURTS, said by
asking the rule itself, checked against ``decide`` on every size and reps."""

from __future__ import annotations

import pytest

from pytest_skillcourt.stats.verdict import PairOutcome, VerdictKind, decide, unreachable


def lopsided(n: int, reps: int, helps: bool) -> list[PairOutcome]:
    """The most one-sided outcome there is: one arm always succeeds, the other never."""
    return [PairOutcome(f"t{i}", r, helps, not helps, 100, 100) for i in range(n) for r in range(1, reps + 1)]


@pytest.mark.parametrize("reps", [1, 2, 3, 5])
@pytest.mark.parametrize("n", range(0, 9))
def test_unreachable_exactly_when_even_the_most_lopsided_outcome_cannot_decide(n: int, reps: int) -> None:
    decidable = (decide(lopsided(n, reps, True)).kind == VerdictKind.HELPS
                 and decide(lopsided(n, reps, False)).kind == VerdictKind.HURTS)
    assert (unreachable(n, reps) is None) == decidable


def test_the_words_name_the_smallest_change() -> None:
    assert unreachable(2, 1) == "2 tasks: every trial of this suite is INCONCLUSIVE; add 1 task"
    assert unreachable(1, 3) == "1 task: every trial of this suite is INCONCLUSIVE; add 2 tasks"
    assert unreachable(2, 1, total=6) == (
        "2 tasks: every trial of this suite is INCONCLUSIVE; select 1 more task (the suite has 6: "
        "--skill-court-tasks 3 or more, and no -k that leaves them out)")
    assert unreachable(2, 1, total=2) == "2 tasks: every trial of this suite is INCONCLUSIVE; add 1 task"
    # the fewest tasks the rule can decide: every one of them must move the same way
    assert unreachable(3, 1) is None
