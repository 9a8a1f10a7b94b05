"""Judgments into the JUnit properties of the pair's run items.

Check-less pairs are judged on the controller after the runs, when pytest's
junitxml has already frozen the run items' properties; so once junitxml has
written its file, the judgment of each pair is added to both of its
testcases (``judge_winner``, ``judge_picks``, ``judge_reasons``,
``judge_model``, ``judge_tokens``, ``outcome``).  The file is rewritten
atomically; a file that cannot be read is left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping


def add_pair_properties(xml_path: Path, props: Mapping[tuple[str, str], list[tuple[str, str]]]) -> int:
    """Append properties to testcases keyed by (classname suffix, name); returns how many matched."""
    import xml.etree.ElementTree as ET

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
    import io

    from ..atomic import write_atomic

    buffer = io.BytesIO()
    tree.write(buffer, encoding="utf-8", xml_declaration=True)
    write_atomic(Path(xml_path), buffer.getvalue())
    return matched
