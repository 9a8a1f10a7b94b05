"""docs/architecture.md tells the truth about the imports.

Its floor table puts every module of the package on one of four floors; an import
only points to the same floor or down, at any depth (an import inside a function
is still an arrow), nothing imports the pytest entry point, and the modules'
load-time imports make no circle.  This reads the table from the page itself, so
the page and the code cannot drift apart silently.  And a name has one home: no module
imports a name only to hand it on (but for the allowed ones below).
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


def import_circles(*, top_only: bool) -> list[list[str]]:
    """Every circle of the package's imports (``top_only``: those run when a module loads)."""
    graph: dict[str, set[str]] = {}
    for path in sources():
        graph[module_name(path)] = {t for t, _ in imports(path, top_only=top_only) if module_exists(t)}
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
    return circles


def test_the_modules_load_without_an_import_circle() -> None:
    assert import_circles(top_only=True) == []


def test_no_circle_hides_in_an_import_made_later() -> None:
    """An import inside a function (deferred to keep a load light) or under
    ``TYPE_CHECKING`` still ties two modules: a circle through one is a circle of the
    house (``farm-studio look`` draws it), only one that does not fail at load time."""
    assert import_circles(top_only=False) == []


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


#: Module-level imports a module keeps without using them, each with its reason
#: (``{path under pytest_skillcourt/: {name: reason}}``).  Nothing else is imported only to
#: be handed on: a name has one home, and callers import it from there.
KEPT_IMPORTS: dict[str, dict[str, str]] = {
    "plugin/__init__.py": {
        "pytest_addoption": "pytest reads hooks from the plugin module; the hook's home is plugin/options.py"},
    "claude_hooks.py": {
        "main": "the shim Claude Code hooks installed by earlier versions import "
                "(`from pytest_skillcourt.claude_hooks import main`)"},
}
#: A room's face: the package ``__init__.py`` that hands on, in its ``__all__``, what the
#: room's callers use (docs/architecture.md); only the names in its ``__all__`` are kept.
FACES: dict[str, str] = {
    "gateway/__init__.py": "the gateway's face: the gateway, its limits, grants, records and dialect names",
    "sandbox/__init__.py": "the sandbox face: the backend registry and the values of sandbox/base.py",
    "cli/__init__.py": "the CLI's face: what `hermes court` and the console script call",
}
# cli/dashboard_install.py's API_SHIM imports nothing: it is the text of a file it writes.


def module_imports(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """``(bound name, line)`` of each import run at module level (under ``if``, ``try`` and
    ``with`` too; an import in a function or a class is not one), ``__future__`` aside."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            yield from ((a.asname or a.name, node.lineno) for a in node.names if a.name != "*")
        elif isinstance(node, ast.Import):
            yield from ((a.asname or a.name.split(".")[0], node.lineno) for a in node.names)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            todo += [s for handler in getattr(node, "handlers", []) for s in handler.body]


def read_names(tree: ast.Module) -> set[str]:
    """Every name the module's code reads, in string annotations too; ``__all__`` is not a read."""
    found: set[str] = set()
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            found.add(node.id)
        annotations = ([node.annotation] if isinstance(node, (ast.arg, ast.AnnAssign)) and node.annotation
                       else [node.returns] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns
                       else [])
        for text in (c.value for a in annotations for c in ast.walk(a)
                     if isinstance(c, ast.Constant) and isinstance(c.value, str)):
            try:
                todo.append(ast.parse(text, mode="eval"))
            except SyntaxError:
                continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def exported(tree: ast.Module) -> set[str]:
    """The names in the module's ``__all__``."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return set()


def unused_imports(source: str, where: str) -> list[str]:
    """``where:line: name`` for each module-level import of ``source`` (the module at
    ``where``, a path under pytest_skillcourt/) that its code does not read, but for the
    allowed ones."""
    tree = ast.parse(source)
    read = read_names(tree)
    kept = set(KEPT_IMPORTS.get(where, {})) | (exported(tree) if where in FACES else set())
    return [f"{where}:{line}: {name}" for name, line in module_imports(tree) if name not in read | kept]


def test_no_module_imports_a_name_only_to_hand_it_on() -> None:
    """One home per idea: a module-level import the module does not use (a name kept only
    for callers to import from there, ``__all__`` or not) is listed; callers import it from
    the module that defines it.  Probes of an optional dependency inside a function
    (``import paramiko  # noqa: F401``) are not module-level."""
    found = [line for path in sources()
             for line in unused_imports(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix())]
    assert found == []
    for where, names in KEPT_IMPORTS.items():  # the allow-list names real, unused imports
        tree = ast.parse((PACKAGE / where).read_text(encoding="utf-8"))
        assert set(names) <= {n for n, _ in module_imports(tree)} - read_names(tree), where
    assert all((PACKAGE / where).is_file() for where in FACES)


def test_the_check_finds_a_name_imported_only_to_be_handed_on() -> None:
    """A re-export is found with or without ``__all__``, at module level only; a name the
    module's code reads (in a string annotation too) is not."""
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from pytest_skillcourt.core.quarantine_file import ENV_VAR, QuarantineEntry, model_key  # noqa: F401\n"
        "if TYPE_CHECKING:\n"
        "    from pytest_skillcourt.core.trial import Outcome\n"
        "__all__ = ['ENV_VAR', 'key']\n"
        "def key(entry: 'QuarantineEntry', outcome: Outcome | None = None) -> str:\n"
        "    import paramiko  # noqa: F401\n"
        "    return model_key(entry.model)\n"
    )
    assert unused_imports(source, "core/example.py") == ["core/example.py:3: ENV_VAR"]
    assert unused_imports(source.replace("__all__ = ['ENV_VAR', 'key']\n", ""), "core/example.py") == [
        "core/example.py:3: ENV_VAR"]
    assert unused_imports(source, "gateway/__init__.py") == []  # a face hands on what its __all__ lists
