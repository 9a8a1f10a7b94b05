"""Collecting thousands of suites works out each path once: a suite file's real path from
its folder's (``Court._realpath``), a skill folder's listing from the library walk
(``trees.tree_entries(listing=...)``); and pytest does not rewrite this plugin's modules
(``plugin._not_rewritten``).  The answers are those of doing it the long way."""

from __future__ import annotations

import dataclasses
import os
import types
from pathlib import Path

import pytest

from pytest_skillcourt import plugin
from pytest_skillcourt.core.trees import tree_entries
from pytest_skillcourt.plugin.collect import RunId, run_id
from pytest_skillcourt.plugin.court import Court


def _tree(tmp_path: Path) -> Path:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (real / "a.yaml").write_text("x")
    (real / "sub" / "b.yaml").write_text("y")
    os.symlink(real / "a.yaml", real / "link.yaml")
    os.symlink(real, tmp_path / "linked")
    return tmp_path


def test_a_suite_path_is_resolved_as_realpath_resolves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path)
    monkeypatch.chdir(root / "real")
    court = types.SimpleNamespace(_real_dirs={})
    paths = [root / "real" / "a.yaml", root / "real" / "link.yaml", root / "linked" / "a.yaml",
             root / "linked" / "link.yaml", root / "linked" / "sub" / "b.yaml", root / "linked" / "sub" / "..",
             root / "linked" / "missing.yaml", Path("a.yaml"), Path("sub/b.yaml"), Path("link.yaml")]
    for _ in range(2):  # the second time from the folders worked out the first
        for path in paths:
            assert Court._realpath(court, str(path)) == os.path.realpath(path), path  # type: ignore[arg-type]


def test_a_listing_given_walks_as_listing_the_folder_does(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    folder = root / "real"
    names = sorted(os.listdir(folder))
    got = tree_entries(folder, root, real_folder=os.path.realpath(folder), listing=names)
    want = tree_entries(folder, root)
    assert [(rel, path) for rel, path, _ in got] == [(rel, path) for rel, path, _ in want]
    assert [rel for rel, _, _ in got] == ["a.yaml", "link.yaml", "sub/b.yaml"]


class AssertionRewritingHook:
    """As pytest's hook keeps its marks (``_pytest.assertion.rewrite``)."""

    def __init__(self, marked: set[str]) -> None:
        self._must_rewrite = marked
        self._marked_for_rewrite_cache = {name: True for name in marked}


def test_the_plugin_takes_its_package_out_of_assertion_rewriting(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = AssertionRewritingHook({"pytest_skillcourt", "pytest_skillcourt.plugin", "conftest_helpers",
                                   "pytest_skillcourtish"})
    monkeypatch.setattr("sys.meta_path", [object(), hook])
    plugin._not_rewritten()
    assert hook._must_rewrite == {"conftest_helpers", "pytest_skillcourtish"}
    assert set(hook._marked_for_rewrite_cache) == {"conftest_helpers", "pytest_skillcourtish"}


def test_another_pytests_hook_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = AssertionRewritingHook(set())
    hook._must_rewrite = ["pytest_skillcourt"]  # type: ignore[assignment]  # not a set: another layout
    monkeypatch.setattr("sys.meta_path", [hook])
    plugin._not_rewritten()
    assert hook._must_rewrite == ["pytest_skillcourt"]


def test_the_installed_pytest_keeps_its_marks_where_the_plugin_looks() -> None:
    """The opt-out reads pytest's private state: an upgrade that moves it would make it a
    silent no-op (asserts rewritten again, the collection goal's margin gone): fail here."""
    import sys

    from _pytest.assertion.rewrite import AssertionRewritingHook as Real

    hooks = [finder for finder in sys.meta_path if isinstance(finder, Real)]
    if not hooks:
        pytest.skip("this session runs with --assert=plain: no rewriting hook to look at")
    for hook in hooks:
        assert isinstance(getattr(hook, "_must_rewrite", None), set)
        assert isinstance(getattr(hook, "_marked_for_rewrite_cache", None), dict)
        assert type(hook).__name__ == "AssertionRewritingHook"


def test_a_run_id_made_fast_is_the_run_id() -> None:
    fields = ("skills_tests/s.yaml", "s", "t1", 0, "with", 2, "custom/m")
    fast, plain = run_id(*fields), RunId(*fields)
    assert fast == plain and hash(fast) == hash(plain) and repr(fast) == repr(plain)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.arm = "without"  # type: ignore[misc]
