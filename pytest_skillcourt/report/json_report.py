"""``--skill-court-json PATH``: machine-readable results, schema versioned."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..court import SkillCourt

JSON_VERSION = 1


def results(court: "SkillCourt") -> dict[str, Any]:
    from ..verdicts import outcome_dict

    return {
        "version": JSON_VERSION,
        "trial": court.trial,
        "models": list(court.settings.models),
        "sandbox": court.backend,
        "early_stop_skipped_runs": court.early_skipped,
        "verdicts": [outcome_dict(o) for o in court.outcomes],
    }


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(court: "SkillCourt", path: Path) -> None:
    write_atomic(Path(path), json.dumps(results(court), indent=2, ensure_ascii=False) + "\n")
    court.files_written.append(("json report", Path(path)))
