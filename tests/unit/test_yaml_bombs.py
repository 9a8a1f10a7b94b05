"""The YAML bombs the loader tests use are small files (the bombs on both YAML loaders, each
in a child process under a memory limit: ``tests/integration/test_yaml_bombs.py``)."""

from __future__ import annotations

from tests.support.yaml_bombs import laughs, merge_bomb


def test_the_laughs_are_small_files() -> None:
    assert len(laughs()) < 500 and len(merge_bomb()) < 640  # a few hundred bytes
