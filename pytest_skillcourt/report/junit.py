"""Judgments into the JUnit properties of the pair's run items.

Check-less pairs are judged on the controller after the runs, when pytest's
junitxml has already frozen the run items' properties; so once junitxml has
written its file, the judgment of each pair is added to both of its
testcases (``judge_winner``, ``judge_picks``, ``judge_reasons``,
``judge_model``, ``judge_tokens``, ``outcome``).  The file is rewritten
atomically; a file that cannot be read is left alone.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping, Sequence

from ..atomic import write_atomic
from ..collect import model_ids, run_item_name
from ..records import ARM_WITH, ARM_WITHOUT, ARMS
from ..trial import Outcome

Props = dict[tuple[str, str], list[tuple[str, str]]]


def pair_properties(outcomes: Sequence[Outcome], models: Sequence[str],
                    reps: Mapping[str, int]) -> Props:
    """Per judged pair, the properties of its two run items, keyed by (classname, name).

    ``reps`` gives each suite's repetitions (item names carry the rep when > 1)."""
    ids = model_ids(tuple(models))
    props: Props = {}
    for o in outcomes:
        classname = o.target.suite_rel.replace("/", ".")
        for j in o.judgments:
            winner = j["winner"]
            if winner == "tie":
                got = {ARM_WITH: "success", ARM_WITHOUT: "success"}
            elif winner in ARMS:
                loser = ARM_WITHOUT if winner == ARM_WITH else ARM_WITH
                got = {winner: "success", loser: "failure"}
            else:
                got = {ARM_WITH: "none", ARM_WITHOUT: "none"}
            for arm in ARMS:
                name = run_item_name(j["task"], arm, j["rep"], reps.get(o.target.suite_rel, 1),
                                     ids[o.target.model], len(models))
                props[(classname, name)] = [
                    ("outcome", got[arm]), ("outcome_source", "judge"),
                    ("judge_winner", winner or "none"),
                    ("judge_picks", "/".join(p or "-" for p in j["picks"])),
                    ("judge_order", "A=" + j["order"][0] + " first"),
                    ("judge_reasons", j.get("error") or " | ".join(j["reasons"])),
                    ("judge_model", j["judge_model"]),
                    ("judge_tokens", str(j["input_tokens"] + j["output_tokens"])),
                ]
    return props


def add_pair_properties(xml_path: Path, props: Mapping[tuple[str, str], list[tuple[str, str]]]) -> int:
    """Append properties to testcases keyed by (classname suffix, name); returns how many matched."""
    try:
        tree = ET.parse(xml_path)
    except (OSError, ET.ParseError):
        return 0
    matched = 0
    for case in tree.getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        extra = None
        for (suffix, want), values in props.items():
            if name == want and (classname == suffix or classname.endswith("." + suffix)):
                extra = values
                break
        if extra is None:
            continue
        holder = case.find("properties")
        if holder is None:
            holder = ET.Element("properties")
            case.insert(0, holder)
        for key, value in extra:
            for old in [p for p in holder.findall("property") if p.get("name") == key]:
                holder.remove(old)
            ET.SubElement(holder, "property", {"name": key, "value": str(value)})
        matched += 1
    buffer = io.BytesIO()
    tree.write(buffer, encoding="utf-8", xml_declaration=True)
    write_atomic(Path(xml_path), buffer.getvalue())
    return matched
