"""libyaml's own composer for texts that provably break no bound (``safe_yaml``; docs/architecture.md,
"Libraries of thousands of skills").

A text without an anchor and with fewer characters that can open a collection than
``DEPTH_LIMIT`` is composed by the loader itself (twice as fast as composing in Python);
the nodes, values and errors must be exactly those of the bounded composer, and every
other text must still go through it (the bombs: ``tests/integration/test_yaml_bombs.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pytest_skillcourt.core import safe_yaml

DOCUMENTS = [
    "skill: house-format\ntasks:\n- id: t1\n  prompt: 'Question 1: give the total.'\n  check: grep -q x\n",
    "name: pdf\ndescription: Read PDFs\nmetadata:\n  hermes:\n    requires_tools: [terminal]\n",
    "a: 1.10\nb: 0x1F\nc: 2024-01-02\nd: yes\ne: ~\nf: !!str 12\ng: [1, {h: i}]\n",
    "<<: {a: 1}\nb: 2\n",
    "- - - deep enough\n  - x\n",
    "",
    "just text",
]


def nodes(node: Any) -> Any:
    """A node graph as plain data: kind, tag, value and line of every node."""
    if isinstance(node, yaml.ScalarNode):
        return ("scalar", node.tag, node.value, node.start_mark.line)
    if isinstance(node, yaml.SequenceNode):
        return ("seq", node.tag, node.start_mark.line, [nodes(n) for n in node.value])
    if isinstance(node, yaml.MappingNode):
        return ("map", node.tag, node.start_mark.line, [(nodes(k), nodes(v)) for k, v in node.value])
    return node


def bounded(text: str) -> tuple[Any, Any]:
    """What the bounded composer gives (the way every text went before)."""
    loader = safe_yaml.BASE_LOADER(text)
    try:
        root = safe_yaml.compose(loader)
        return root, (loader.construct_document(root) if root is not None else None)
    finally:
        loader.dispose()


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_loader_composes_texts_within_the_bounds_to_the_same_nodes_and_values(
        text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert safe_yaml._within_bounds(text)
    want_root, want = bounded(text)

    def refused(loader: Any) -> None:
        raise AssertionError("composed in Python")

    monkeypatch.setattr(safe_yaml, "compose", refused)
    root, value = safe_yaml.load(text)
    assert value == want and nodes(root) == nodes(want_root)


@pytest.mark.parametrize("text", [
    "a: &x [1, 2]\nb: *x\n",  # an anchor: aliases may expand
    "[" * 100 + "]" * 100,  # could nest as deep as the bound
    "a: " + "-" * 200 + "\n",  # too many characters that could open a collection
])
def test_other_texts_go_through_the_bounded_composer(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not safe_yaml._within_bounds(text)
    used: list[bool] = []
    real = safe_yaml.compose

    def counted(loader: Any) -> Any:
        used.append(True)
        return real(loader)

    monkeypatch.setattr(safe_yaml, "compose", counted)
    safe_yaml.load(text)
    assert used


@pytest.mark.parametrize("text", ["a: *x\n", "a: 1\n---\nb: 2\n", "a: [1, 2\n", "a: 2024-13-45\n"])
def test_errors_read_as_the_bounded_composer_words_them(text: str) -> None:
    with pytest.raises((yaml.YAMLError, ValueError)) as fast:
        safe_yaml.load(text)
    with pytest.raises((yaml.YAMLError, ValueError)) as slow:
        bounded(text)
    assert type(fast.value) is type(slow.value) and str(fast.value) == str(slow.value)
