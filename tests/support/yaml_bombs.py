"""YAML alias bombs as text: small files that would expand to millions of values.

Used as suites and frontmatter by ``tests/integration/test_yaml_bombs.py``; their size is
checked in ``tests/unit/test_yaml_bombs.py``.
"""

from __future__ import annotations

def laughs(levels: int = 9, width: int = 9) -> str:
    """The classic, as one flow list: each level ``width`` aliases of the one before."""
    items = ["&l0 [" + ", ".join(["lol"] * width) + "]"]
    for n in range(1, levels):
        items.append(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * width) + "]")
    return "[" + ", ".join(items) + "]"


def merge_bomb(levels: int = 9, width: int = 9) -> str:
    """Merge keys copy the merged pairs: each level ``width`` times the last."""
    lines = ["m0: &m0 {" + ", ".join(f"k{i}: {i}" for i in range(width)) + "}"]
    for n in range(1, levels):
        lines.append(f"m{n}: &m{n} {{<<: [{', '.join([f'*m{n - 1}'] * width)}], own{n}: 1}}")
    return "\n".join(lines) + "\n"
