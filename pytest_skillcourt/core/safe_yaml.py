"""YAML for suite files and SKILL.md frontmatter, bounded before anything expands.

PyYAML's composers share an aliased node instead of copying it, so a few
hundred bytes of nested aliases ("billion laughs") compose quickly; the cost
comes later, in whatever walks the result as a tree (merge keys, ``str()``,
``json.dumps``): a 404-byte suite once took 32 s and 1.6 GB before its error
appeared.  And libyaml's composer recurses in C: a few hundred kilobytes of
``[`` crash the process.  So this module composes the node graph itself,
without recursion, from the events of the C parser when PyYAML has it
(``yaml.CSafeLoader``, several times faster than the pure one) or of the pure
parser, and refuses, as it composes:

* aliases that together would add more than ``ALIAS_NODE_LIMIT`` nodes when
  expanded (an alias counts the whole expanded size of what it names, so a
  bomb is refused at its first few levels, never expanded);
* an alias inside the collection it names (it never ends when expanded);
* nesting deeper than ``DEPTH_LIMIT``.

Everything else is exactly PyYAML's safe loading (the same events, tag
resolution, errors and ``SafeConstructor``), so a document within the bounds
loads as ``yaml.load(text, Loader=yaml.CSafeLoader)`` loads it (Hermes Agent's
own frontmatter loader).  A text that provably breaks no bound (no anchor, fewer
characters that can open a collection than ``DEPTH_LIMIT``: most suites and
frontmatter) is composed by the loader itself, libyaml's composer in C, which gives
the same nodes twice as fast; any error there is composed again here, so errors read
as they always have.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import (AliasEvent, MappingEndEvent, MappingStartEvent, ScalarEvent,
                         SequenceEndEvent, SequenceStartEvent, StreamEndEvent)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

#: Nodes that all aliases of one document may add when expanded, together.
ALIAS_NODE_LIMIT = 10_000
#: Collections inside collections, at most.
DEPTH_LIMIT = 100

#: The loader whose parser gives the events: libyaml's when installed.
BASE_LOADER: type = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


class YamlLimitError(yaml.MarkedYAMLError):
    """Valid YAML refused because expanding it would cost too much; ``problem_mark`` is where."""


def load(text: str) -> tuple[Node | None, Any]:
    """The document's root node (for line numbers) and its Python value.

    Raises:
        YamlLimitError: aliases expand too far, refer to themselves, or nesting is too deep.
        yaml.YAMLError: the text is not one valid YAML document.
        ValueError: a value PyYAML cannot construct (a timestamp such as 2024-13-45).
    """
    if _within_bounds(text):
        loader = BASE_LOADER(text)
        try:  # the loader composes (libyaml's composer, in C): the text cannot nest deep or expand
            root = loader.get_single_node()
            return root, (construct_plain(loader, root) if root is not None else None)
        except (yaml.YAMLError, ValueError):
            pass  # composed again below, for the error exactly as it has always been worded
        finally:
            loader.dispose()
    loader = BASE_LOADER(text)
    try:
        root = compose(loader)
        return root, (loader.construct_document(root) if root is not None else None)
    finally:
        loader.dispose()


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
#: Mapping keys whose meaning ``SafeConstructor`` gives by rewriting the mapping (``<<``, ``=``).
_REWRITTEN_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


class _NotPlain(Exception):
    """A node :func:`construct_plain` leaves to ``SafeConstructor``."""


def construct_plain(loader: Any, root: Node) -> Any:
    """``loader.construct_document(root)`` for a document without anchors, the same value
    made without the constructor's per-node bookkeeping (its generators, its memo of
    constructed nodes, which only aliases use): plain mappings, sequences and text are
    built here, any other scalar (a number, a boolean, a date...) by ``SafeConstructor``
    itself.  A document holding anything else (a merge key ``<<``, a tagged collection
    such as ``!!set``, a collection used as a key) or whose construction fails is
    constructed by ``construct_document`` from the start, so its value and its errors are
    exactly that method's.  About three times faster on suites and frontmatter."""
    try:
        data = _plain(loader, root)
    except (_NotPlain, yaml.YAMLError, ValueError, TypeError):
        loader.constructed_objects = {}
        loader.recursive_objects = {}
        return loader.construct_document(root)
    loader.constructed_objects = {}
    return data


def _plain(loader: Any, node: Node) -> Any:
    tag = node.tag
    if type(node) is ScalarNode:
        return node.value if tag == _STR else loader.construct_object(node)
    if type(node) is MappingNode and tag == _MAP:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode or key_node.tag in _REWRITTEN_KEYS:
                raise _NotPlain
            out[key_node.value if key_node.tag == _STR else loader.construct_object(key_node)] = (
                _plain(loader, value_node))
        return out
    if type(node) is SequenceNode and tag == _SEQ:
        return [_plain(loader, child) for child in node.value]
    raise _NotPlain


#: Characters that open a collection: a flow one (``[``, ``{``) or a block one (every
#: block mapping has a ``:`` or ``?``, every block sequence a ``-``).
_OPENERS = "[{:?-"


def _within_bounds(text: str) -> bool:
    """The text can break no bound: no anchor (so no alias expands: ``&`` is the only
    way to make one), and fewer characters that could open a collection than
    ``DEPTH_LIMIT`` (each collection on a nesting path opens with one of its own, so
    nothing is nested that deep).  Such a text composes to the same nodes whoever
    composes it, with no recursion deeper than that, so the loader's own composer
    (libyaml's, in C: about twice as fast as :func:`compose`) is used for it."""
    return "&" not in text and sum(text.count(c) for c in _OPENERS) < DEPTH_LIMIT


def compose(loader: Any) -> Node | None:
    """Compose the single document of ``loader``'s stream, within the bounds.

    Mirrors ``yaml.composer.Composer.get_single_node`` with an explicit stack.
    """
    loader.get_event()  # StreamStart
    if loader.check_event(StreamEndEvent):
        loader.get_event()
        return None
    loader.get_event()  # DocumentStart
    root = _compose_root(loader)
    loader.get_event()  # DocumentEnd
    if not loader.check_event(StreamEndEvent):
        event = loader.get_event()
        raise ComposerError("expected a single document in the stream", root.start_mark,
                            "but found another document", event.start_mark)
    loader.get_event()  # StreamEnd
    return root


class _Open:
    """A collection being composed: its node, a mapping's pending key, its expanded size."""

    __slots__ = ("node", "key", "size", "anchor")

    def __init__(self, node: Node, anchor: str | None) -> None:
        self.node = node
        self.key: Node | None = None
        self.size = 1
        self.anchor = anchor


def _compose_root(loader: Any) -> Node:
    anchors: dict[str, Node] = {}
    sizes: dict[str, int] = {}  # expanded size of each finished anchored node
    added = 0  # nodes the aliases so far add when expanded
    stack: list[_Open] = []
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is AliasEvent:
            anchor = event.anchor
            if anchor not in anchors:
                raise ComposerError(None, None, f"found undefined alias {anchor!r}", event.start_mark)
            if anchor not in sizes:
                raise YamlLimitError(
                    None, None, f"the alias *{anchor} is inside the collection &{anchor} it names, "
                    "so expanding it never ends; write the value out instead", event.start_mark)
            node, size = anchors[anchor], sizes[anchor]
            added += size
            if added > ALIAS_NODE_LIMIT:
                raise YamlLimitError(
                    None, None, f"the aliases up to *{anchor} would expand to more than "
                    f"{ALIAS_NODE_LIMIT} values; write the repeated part out, or repeat it less",
                    event.start_mark)
        else:
            anchor = getattr(event, "anchor", None)  # end events have none
            if anchor is not None and anchor in anchors:
                raise ComposerError(f"found duplicate anchor {anchor!r}; first occurrence",
                                    anchors[anchor].start_mark, "second occurrence", event.start_mark)
            if kind is ScalarEvent:
                tag = event.tag
                if tag is None or tag == "!":
                    tag = loader.resolve(ScalarNode, event.value, event.implicit)
                node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
                size = 1
                if anchor is not None:
                    anchors[anchor], sizes[anchor] = node, size
            elif kind is SequenceStartEvent or kind is MappingStartEvent:
                node_class = SequenceNode if kind is SequenceStartEvent else MappingNode
                tag = event.tag
                if tag is None or tag == "!":
                    tag = loader.resolve(node_class, None, event.implicit)
                if len(stack) >= DEPTH_LIMIT:
                    raise YamlLimitError(None, None, f"collections are nested more than {DEPTH_LIMIT} "
                                         "deep; flatten the structure", event.start_mark)
                opened = node_class(tag, [], event.start_mark, None, flow_style=event.flow_style)
                if anchor is not None:
                    anchors[anchor] = opened  # an alias to it before its end is refused above
                stack.append(_Open(opened, anchor))
                continue
            elif kind is SequenceEndEvent or kind is MappingEndEvent:
                done = stack.pop()
                node, size = done.node, done.size
                node.end_mark = event.end_mark
                if done.anchor is not None:
                    sizes[done.anchor] = size
            else:  # pragma: no cover - the parser gives no other event inside a document
                raise ComposerError(None, None, f"unexpected {kind.__name__}", event.start_mark)
        if not stack:
            return node
        top = stack[-1]
        top.size += size
        if isinstance(top.node, SequenceNode):
            top.node.value.append(node)
        elif top.key is None:
            top.key = node
        else:
            top.node.value.append((top.key, node))
            top.key = None
