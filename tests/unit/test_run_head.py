"""A run's head (``records.RunHead``): what a cached session reads of a run, written beside
its record and read back, many at once, as what was written or as nothing."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_skillcourt.core.records import HEAD_FIELDS, RunHead
from tests.support.builders import run_record


def test_a_head_is_the_records_fields_and_reads_back_as_written() -> None:
    record = dataclasses.replace(run_record("r1", "k1"), reach="sha256:r", error="é\u2028 \"quoted\"",
                                 check_exit=3, needs_judge=True, api_calls=4, duration_s=1.5)
    head = record.head()
    assert tuple(head) == tuple(getattr(record, name) for name in HEAD_FIELDS)
    assert head.tokens == record.tokens
    assert RunHead.from_text(head.to_text()) == head
    assert RunHead.from_texts([head.to_text(), None, head.to_text()]) == [head, None, head]


@pytest.mark.parametrize("other", ['[2, "a later layout"]', '{"run_id": "r1"}', "[]", '"text"', "null"])
def test_a_text_of_another_layout_reads_as_none_and_spares_its_neighbours(other: str) -> None:
    head = run_record("r1", "k1").head()
    assert RunHead.from_text(other) is None
    assert RunHead.from_texts([head.to_text(), other, head.to_text()]) == [head, None, head]


def test_a_damaged_text_is_an_error_not_a_shifted_neighbour() -> None:
    head = run_record("r1", "k1").head()
    with pytest.raises(ValueError):
        RunHead.from_texts([head.to_text(), head.to_text()[:-3]])
    with pytest.raises(ValueError):  # two texts that make one valid JSON text when joined
        RunHead.from_texts(['[1, "a"', '"b"]', head.to_text()])
