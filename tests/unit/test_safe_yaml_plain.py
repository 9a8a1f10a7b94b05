"""``safe_yaml.construct_plain``: a document without anchors is constructed without
``SafeConstructor``'s per-node bookkeeping (collection in a library of thousands of
skills parses thousands of suites and frontmatters), to exactly the value, the node graph
and the error ``construct_document`` gives."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from pytest_skillcourt.core import safe_yaml

PLAIN = [
    "skill: house-format\ntasks:\n- id: t1\n  prompt: 'Question 1: give the total.'\n  check: grep -q x\n"
    "  files: {a.txt: hello, 1.10: x}\n",
    "name: pdf\ndescription: Read PDFs\nmetadata:\n  hermes:\n    requires_tools: [terminal]\n",
    "a: 1.10\nb: 0x1F\nc: 2024-01-02\nd: yes\ne: ~\nf: !!str 12\ng: [1, {h: i}]\nh: .inf\ni: 1_000\n",
    "1: a\nnull: b\ntrue: c\n2024-01-02: d\n",
    "a: b\na: c\n",  # the last of a repeated key
    "- - - deep\n  - x\n",
    "just text",
    "y: !!binary aGVsbG8=\n",
]
#: Documents ``construct_plain`` leaves to ``construct_document``: merge and value keys
#: (which rewrite the mapping's nodes), tagged collections.
OTHER = ["<<: {a: 1}\nb: 2\n", "= : 3\nq: 1\n", "!!set {a, b}\n", "!!omap [a: 1]\n", "a: !!pairs [b: 1]\n"]
#: Documents that do not construct (an unknown tag, a bad date, a collection as a key...).
ERRORS = ["a: !foo x\n", "a: 2024-13-45\n", "a: !!python/name:os.system\n", "? {a: 1}\n: b\n", "? [a]\n: 1\n",
          "a: !!int x\n"]


def nodes(node: Any) -> Any:
    """A node graph as plain data: kind, tag, value and line of every node."""
    if isinstance(node, yaml.ScalarNode):
        return ("scalar", node.tag, node.value, node.start_mark.line)
    if isinstance(node, yaml.SequenceNode):
        return ("seq", node.tag, node.start_mark.line, [nodes(n) for n in node.value])
    if isinstance(node, yaml.MappingNode):
        return ("map", node.tag, node.start_mark.line, [(nodes(k), nodes(v)) for k, v in node.value])
    return node


def constructed(text: str, plain: bool) -> tuple[Any, Any]:
    loader = safe_yaml.BASE_LOADER(text)
    try:
        root = loader.get_single_node()
        value = safe_yaml.construct_plain(loader, root) if plain else loader.construct_document(root)
        return value, nodes(root)
    finally:
        loader.dispose()


@pytest.mark.parametrize("text", PLAIN + OTHER)
def test_the_value_and_the_nodes_are_those_of_construct_document(text: str) -> None:
    got, want = constructed(text, plain=True), constructed(text, plain=False)
    assert got == want and repr(got[0]) == repr(want[0])  # repr: 1 and True, 1.0 and 1 differ


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_document_is_built_without_construct_document(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    want = constructed(text, plain=False)

    def refused(self: Any, node: Any) -> None:
        raise AssertionError("constructed by construct_document")

    monkeypatch.setattr(safe_yaml.BASE_LOADER, "construct_document", refused)
    assert constructed(text, plain=True) == want


@pytest.mark.parametrize("text", OTHER)
def test_other_documents_are_left_to_construct_document(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    used: list[bool] = []
    real = safe_yaml.BASE_LOADER.construct_document

    def counted(self: Any, node: Any) -> Any:
        used.append(True)
        return real(self, node)

    monkeypatch.setattr(safe_yaml.BASE_LOADER, "construct_document", counted)
    constructed(text, plain=True)
    assert used


@pytest.mark.parametrize("text", ERRORS)
def test_errors_are_those_of_construct_document(text: str) -> None:
    with pytest.raises((yaml.YAMLError, ValueError)) as fast:
        constructed(text, plain=True)
    with pytest.raises((yaml.YAMLError, ValueError)) as slow:
        constructed(text, plain=False)
    assert type(fast.value) is type(slow.value) and str(fast.value) == str(slow.value)


@pytest.mark.parametrize("text", PLAIN + OTHER)
def test_load_gives_what_it_gave_before(text: str) -> None:
    root, value = safe_yaml.load(text)
    assert (value, nodes(root)) == constructed(text, plain=False)
