"""``--skill-court-json PATH``: machine-readable results, schema versioned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic import write_atomic

if TYPE_CHECKING:
    from ..session import SkillCourt

JSON_VERSION = 1


def results(court: "SkillCourt") -> dict[str, Any]:
    from ..controller import outcome_dict

    return {
        "version": JSON_VERSION,
        "trial": court.trial,
        "models": list(court.settings.models),
        "sandbox": court.backend,
        "early_stop_skipped_runs": court.early_skipped,
        "verdicts": [outcome_dict(o) for o in court.outcomes],
    }


def write_json(court: "SkillCourt", path: Path) -> None:
    write_atomic(Path(path), json.dumps(results(court), indent=2, ensure_ascii=False) + "\n")
    court.files_written.append(("json report", Path(path)))
