"""docs/architecture.md tells the truth about the imports.

Its floor table puts every module of the package on one of four floors; an import
only points to the same floor or down, at any depth (an import inside a function
is still an arrow), nothing imports the pytest entry point, and the modules'
load-time imports make no circle.  This reads the table from the page itself, so
the page and the code cannot drift apart silently.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.support import REPO

PACKAGE = REPO / "pytest_skillcourt"
DOC = REPO / "docs" / "architecture.md"


def floors(text: str | None = None) -> dict[str, int]:
    """``{room: floor}`` from the page's table (or ``text``): a room is a top-level module or
    subpackage; what it holds, in brackets after it, is not a room."""
    out: dict[str, int] = {}
    for line in (DOC.read_text(encoding="utf-8") if text is None else text).splitlines():
        row = re.match(r"\|\s*(\d)\.\s[^|]*\|([^|]*)\|", line)
        if not row:
            continue
        rooms_text = row.group(2)
        while re.search(r"\([^()]*\)", rooms_text):  # what a room holds is said in brackets
            rooms_text = re.sub(r"\([^()]*\)", "", rooms_text)
        for name in re.findall(r"`([A-Za-z_][\w]*)(?:\.py|/)`", rooms_text):
            assert name not in out, f"{name} is on two floors of {DOC.name}'s table"
            out[name] = int(row.group(1))
    return out


def rooms() -> set[str]:
    """The package's top-level modules and subpackages."""
    found = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    found |= {p.name for p in PACKAGE.iterdir()  # subpackages, namespace ones (agent/) included
              if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))}
    return found


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "pytest_skillcourt" else None


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, *, top_only: bool = False) -> Iterator[tuple[str, int]]:
    """``(module, line)`` for each import of the package's own modules in ``path``
    (with ``top_only``, those run when the module loads: not in a function or under
    ``TYPE_CHECKING``)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.If) and top_only and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("pytest_skillcourt"):
                continue
            for alias in node.names:  # `from . import x`: x may be a module of its own
                sub = f"{target}.{alias.name}"
                yield (sub if module_exists(sub) else target), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_skillcourt"):
                    yield alias.name, node.lineno


def module_exists(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path.is_dir() and any(path.glob("*.py")))


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_room_of_the_package_is_on_one_floor_of_the_table() -> None:
    table = floors()
    assert sorted(rooms() - set(table)) == [], "modules missing from docs/architecture.md's floor table"
    assert sorted(set(table) - rooms()) == [], "the floor table names modules the package does not have"


def upward(table: dict[str, int]) -> list[str]:
    """Every import in the package that points to a higher floor of ``table``."""
    up = []
    for path in sources():
        mine = room_of(module_name(path))
        if mine is None:  # the package's __init__
            continue
        for target, line in imports(path):
            theirs = room_of(target)
            if theirs is None or theirs == mine or theirs not in table or mine not in table:
                continue
            if table[theirs] > table[mine]:
                up.append(f"{path.relative_to(REPO)}:{line}: {mine} (floor {table[mine]}) imports "
                          f"{theirs} (floor {table[theirs]})")
    return up


def test_imports_point_to_the_same_floor_or_down() -> None:
    assert upward(floors()) == []


def test_nothing_imports_the_pytest_entry_point() -> None:
    found = [f"{path.relative_to(REPO)}:{line}" for path in sources() if module_name(path) != "pytest_skillcourt.plugin"
             for target, line in imports(path) if target == "pytest_skillcourt.plugin"]
    assert found == []


def test_the_modules_load_without_an_import_circle() -> None:
    graph: dict[str, set[str]] = {}
    for path in sources():
        graph[module_name(path)] = {t for t, _ in imports(path, top_only=True) if module_exists(t)}
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            # importing a submodule loads its package first: that is not a circle
            if node.startswith(nxt + "."):
                continue
            if state.get(nxt) == 1:
                circles.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif state.get(nxt) is None:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_the_check_finds_a_module_below_its_importers() -> None:
    """The checks above can fail: with ``stats/`` moved to the faces in the table, every
    room below that imports it is reported, and a room left out of the table is seen."""
    text = DOC.read_text(encoding="utf-8")
    moved = text.replace("| 1. ground | `stats/` ", "| 1. ground | ")
    moved = moved.replace("| 5. faces | ", "| 5. faces | `stats/`, ")
    table = floors(moved)
    assert table["stats"] == 5
    assert any("imports stats (floor 5)" in line for line in upward(table))
    assert "plugin" not in floors(text.replace("| 5. faces | `plugin/` ", "| 5. faces | "))


def test_no_test_module_imports_another() -> None:
    """What tests share lives in ``tests/support/``: a test module imported by another would
    run its tests' module-level code, and its fixtures, twice under two names."""
    found = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.relative_to(REPO)}:{node.lineno}: {name}" for name in names
                      if re.match(r"tests\.(unit|e2e|integration)\.", name)]
    assert found == []
