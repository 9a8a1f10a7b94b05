"""Where a verdict's suite came from (``core/frozen.py``): its dict is what the store and
the reports keep of it, every field, as ``dataclasses.asdict`` would give it."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_skillcourt.core.frozen import AT_REF, NEW, WORKING_TREE, SuiteSource


@pytest.mark.parametrize("source", [
    SuiteSource(),
    SuiteSource(WORKING_TREE, changed_with_skill=True),
    SuiteSource(AT_REF, ref="origin/main", commit="0123456789abcdef"),
    SuiteSource(NEW, ref="v1.2"),
])
def test_the_dict_of_a_source_holds_every_field(source: SuiteSource) -> None:
    assert source.to_dict() == dataclasses.asdict(source)
    assert list(source.to_dict()) == [f.name for f in dataclasses.fields(SuiteSource)]
    assert SuiteSource(**source.to_dict()) == source
