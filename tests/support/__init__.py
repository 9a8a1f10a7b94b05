"""What the tests share: the model-provider test server, the sandbox images, the
agent CLI finders, and one module of builders (ini, court runner, library, client)."""

from __future__ import annotations

from pathlib import Path

#: The repository's root folder (the one holding ``pyproject.toml``).
REPO = Path(__file__).resolve().parents[2]
