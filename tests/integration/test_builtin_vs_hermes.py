"""The built-in agent shows a library exactly as Hermes Agent 0.19.0 does.

Differential: real Hermes' own functions (``agent.prompt_builder.build_skills_system_prompt``,
``tools.skills_tool.skills_list`` and ``skill_view``), run in a subprocess whose
``HERMES_HOME/skills`` is the library and whose ``config.yaml`` disables the
skills the ``without`` arm hides, against the built-in agent's
(``agent/prompt.py``, ``agent/tools.py``) on the same library.  Compared: the
``<available_skills>`` index, ``skills_list`` (all, by category, an unknown
category), ``skill_view`` of every skill by every name form (frontmatter name,
folder name, path, ``path/SKILL.md``, ``category:name``), files of it (text,
binary, missing, a folder, escapes), disabled skills by every form, and
lookups that fail.  Hermes' host paths are mapped to the sandbox's
(``SKILLS_ROOT``) before comparing.

Libraries: Hermes' bundled ``skills/`` and ``optional-skills/`` from the
0.19.0 sdist (``tests/run_all.sh`` downloads it into ``tests/.hermes-sdist``;
``SKILL_COURT_HERMES_SDIST`` points elsewhere), a library of Anthropic's public
skills' shapes, and hand-made edge cases.  The differences that remain by
design are in docs/architecture.md ("How the built-in agent shows a library");
:func:`_normalized` undoes exactly those, nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.agent.prompt import render_system_prompt
from pytest_skillcourt.agent.tools import SKILLS_ROOT, TOOLSETS, skills_list, view_skill
from pytest_skillcourt.core.skills import Library, load_library
from pytest_skillcourt.core.trees import is_junk

HERMES_VERSION = "0.19.0"
SDIST = Path(os.environ.get("SKILL_COURT_HERMES_SDIST")
             or Path(__file__).resolve().parents[1] / ".hermes-sdist") / f"hermes_agent-{HERMES_VERSION}"

#: Runs in a subprocess with HERMES_HOME set: real Hermes' answers for the calls in the spec.
HERMES_SIDE = r"""
import json, sys
spec = json.load(open(sys.argv[1], encoding="utf-8"))
# Hermes parses every SKILL.md's YAML again at each skill_view; remember each
# text's parse (a copy each time, so nothing Hermes changes leaks): the same
# answers, several times faster.
from agent import skill_utils
skill_utils.yaml_load("a: 1")
_parse, _seen = skill_utils._yaml_load_fn, {}
def _copy(value):  # YAML gives dicts, lists and immutable scalars
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
def _remembered(text):
    if text not in _seen:
        try:
            _seen[text] = (True, _parse(text))
        except Exception as err:
            _seen[text] = (False, err)
    ok, value = _seen[text]
    if not ok:
        raise value
    return _copy(value)
skill_utils._yaml_load_fn = _remembered
from agent.prompt_builder import build_skills_system_prompt
from tools.skills_tool import skill_view, skills_list
out = {
    "index": build_skills_system_prompt(available_tools=set(spec["tools"]),
                                        available_toolsets=set(spec["toolsets"])),
    "lists": [skills_list(category=c) for c in spec["categories"]],
    "views": [skill_view(name, file_path=file_path) for name, file_path in spec["views"]],
}
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
"""


def _need(reason: str) -> None:
    """Skip without the dependency; with SKILL_COURT_REQUIRE_HERMES=1 (CI), fail."""
    if not reason:
        return
    if os.environ.get("SKILL_COURT_REQUIRE_HERMES", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason} (SKILL_COURT_REQUIRE_HERMES=1 is set, so this is a failure)", pytrace=False)
    pytest.skip(reason)


def _hermes_python() -> str:
    """The interpreter that has Hermes 0.19.0 (this one when it is installed here)."""
    probe = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('hermes-agent'))"],
                           capture_output=True, text=True, check=False)
    _need("" if probe.returncode == 0 else "hermes-agent is not installed (pip install hermes-agent)")
    _need("" if probe.stdout.strip() == HERMES_VERSION
          else f"hermes-agent {probe.stdout.strip()} is installed; this test is for {HERMES_VERSION}")
    return sys.executable


# -- the libraries ---------------------------------------------------------------


def _write(root: Path, rel: str, content: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")


def _sdist(part: str) -> Callable[[Path], None]:
    def build(root: Path) -> None:
        source = SDIST / part
        _need("" if source.is_dir() else
              f"{source} is missing: run tests/run_all.sh (it downloads the hermes-agent {HERMES_VERSION} sdist)")
        shutil.copytree(source, root, symlinks=True)
    return build


FONT = bytes(range(256)) * 4  # not UTF-8: Hermes shows a binary file's name and size


def _anthropic(root: Path) -> None:
    """Anthropic's public skills' shapes (github.com/anthropics/skills): the library is
    the repository root (``skills/<name>``, ``template/``), ``license:`` lines, ``|-``
    and quoted descriptions, top-level reference files, scripts, fonts and a PDF."""
    _write(root, "README.md", "# Skills\n")
    _write(root, "spec/agent-skills-spec.md", "# Spec\n")
    _write(root, "template/SKILL.md", "---\nname: template-skill\ndescription: Replace with description of the "
           "skill and when Claude should use it.\n---\n\n# Insert instructions below\n")
    _write(root, "skills/pdf/SKILL.md", "---\nname: pdf\ndescription: Use this skill whenever the user wants to do "
           "anything with PDF files. This includes reading or extracting text/tables from PDFs.\nlicense: "
           "Proprietary. LICENSE.txt has complete terms\n---\n\n# PDF\n\nFor forms read forms.md; see "
           "reference.md.\n")
    _write(root, "skills/pdf/forms.md", "# Forms\n")
    _write(root, "skills/pdf/reference.md", "# Reference\n")
    _write(root, "skills/pdf/LICENSE.txt", "Proprietary.\n")
    _write(root, "skills/pdf/scripts/check_fillable_fields.py", "print('ok')\n")
    _write(root, "skills/pdf/scripts/fill.sh", "echo fill\n")
    _write(root, "skills/docx/SKILL.md", '---\nname: docx\ndescription: "Use this skill whenever the user wants to '
           'create, read, edit, or manipulate Word documents (.docx files). Triggers include: any mention"\n'
           "license: Proprietary. LICENSE.txt has complete terms\n---\n\n# DOCX\n")
    _write(root, "skills/docx/ooxml/schemas/wml.xsd", "<xsd/>\n")
    _write(root, "skills/docx/scripts/document.py", "pass\n")
    _write(root, "skills/claude-api/SKILL.md", "---\nname: claude-api\ndescription: |-\n  Reference for the Claude "
           "API / Anthropic SDK — model ids, pricing, params.\n  TRIGGER — read BEFORE opening the target file.\n"
           "license: Complete terms in LICENSE.txt\n---\n\n# Claude API\n")
    _write(root, "skills/claude-api/python/README.md", "# Python\n")
    _write(root, "skills/canvas-design/SKILL.md", "---\nname: canvas-design\ndescription: Create beautiful visual "
           "art in .png and .pdf documents using design philosophy.\nlicense: Complete terms in LICENSE.txt\n"
           "---\n\nFonts are in canvas-fonts/.\n")
    _write(root, "skills/canvas-design/canvas-fonts/Lora-Regular.ttf", FONT)
    _write(root, "skills/canvas-design/canvas-fonts/Lora-OFL.txt", "SIL Open Font License\n")
    _write(root, "skills/brand-guidelines/SKILL.md", "---\nname: brand-guidelines\ndescription: Applies "
           "Anthropic's official brand colors and typography to any sort of artifact.\nlicense: Complete terms "
           "in LICENSE.txt\n---\n\n# Brand\n")
    _write(root, "skills/theme-factory/SKILL.md", "---\nname: theme-factory\ndescription: Toolkit for styling "
           "artifacts with a theme.\n---\n\nThemes are in themes/.\n")
    _write(root, "skills/theme-factory/themes/ocean.md", "# Ocean\n")
    _write(root, "skills/theme-factory/theme-showcase.pdf", b"%PDF-1.4\n\xe2\xe3\xcf\xd3\n")
    _write(root, "skills/skill-creator/SKILL.md", "---\nname: skill-creator\ndescription: Create new skills, "
           "modify and improve existing skills.\n---\n\n# Skill creator\n")
    _write(root, "skills/skill-creator/references/schemas.md", "# Schemas\n")
    _write(root, "skills/skill-creator/assets/eval_review.html", "<html></html>\n")
    _write(root, "skills/skill-creator/agents/grader.md", "# Grader\n")
    _write(root, "skills/skill-creator/scripts/run_eval.py", "pass\n")
    _write(root, "skills/webapp-testing/SKILL.md", "---\nname: webapp-testing\ndescription: Toolkit for "
           "interacting with and testing local web applications using Playwright.\nlicense: Complete terms in "
           "LICENSE.txt\n---\n\nRun scripts/with_server.py --help first.\n")
    _write(root, "skills/webapp-testing/scripts/with_server.py", "pass\n")
    _write(root, "skills/webapp-testing/examples/element_discovery.py", "pass\n")


def _edges(root: Path) -> None:
    """Hand-made: Hermes' gating fields, category descriptions, nesting, name forms,
    binary and large files, ${HERMES_SKILL_DIR}, CRLF, setup fields, flat files,
    a skill in a dot folder and in a category called scripts, links inside."""
    def skill(rel: str, front: str, body: str = "Body.\n") -> None:
        _write(root, f"{rel}/SKILL.md", f"---\n{front}\n---\n\n{body}")

    _write(root, "ops/DESCRIPTION.md", "---\ndescription: 'Operations: deploys and rollbacks'\n---\n")
    _write(root, "ops/README.md", "# ops\n")
    skill("ops/deploy", "name: deploy-prod\ndescription: Deploy to production safely, with a rollback plan "
          "ready before the first step", "Run ${HERMES_SKILL_DIR}/scripts/deploy.sh, never ${HERMES_SESSION_ID}.\n")
    _write(root, "ops/deploy/scripts/deploy.sh", "#!/bin/sh\necho deploy\n")
    _write(root, "ops/deploy/scripts/helper.rb", "puts 1\n")
    _write(root, "ops/deploy/references/runbook.md", "# Runbook\n")
    _write(root, "ops/deploy/references/table.csv", "a,b\n")
    _write(root, "ops/deploy/templates/nested/config.yaml", "k: v\n")
    _write(root, "ops/deploy/assets/logo.png", b"\x89PNG\r\n\x1a\n\xff\x00")
    _write(root, "ops/deploy/notes.md", "Notes.\n")
    _write(root, "ops/deploy/guide.md", "A flat guide.\n")
    _write(root, "ops/deploy/.DS_Store", b"\x00\x00\x00\x01Bud1")
    skill("ops/rollback", "description: No name, so the folder names it")
    skill("ops/deploy/canary", "name: canary\ndescription: Nested inside another skill's folder")
    skill("ops/deploy/references/old-package", "name: archived\ndescription: A preserved package, no skill")
    skill("mac/only", "name: mac-only\ndescription: macOS only\nplatforms: [macos]")
    skill("mac/linux-str", "name: linux-string\ndescription: platforms as a string\nplatforms: linux")
    skill("env/kanban", "name: kanban-only\ndescription: kanban workers only\nenvironments: [kanban]")
    skill("env/s6", "name: s6-only\ndescription: s6 image only\nenvironments: [s6]")
    skill("env/unknown", "name: some-env\ndescription: an environment Hermes does not know\n"
          "environments: [mars]")
    skill("gate/needs-terminal", "name: needs-terminal\ndescription: shown\nmetadata:\n  hermes:\n"
          "    requires_toolsets: [terminal]")
    skill("gate/needs-browser", "name: needs-browser\ndescription: hidden: no browser toolset\nmetadata:\n"
          "  hermes:\n    requires_toolsets: [browser]")
    skill("gate/web-fallback", "name: web-fallback\ndescription: shown: no web toolset\nmetadata:\n  hermes:\n"
          "    fallback_for_toolsets: [web]")
    skill("gate/terminal-fallback", "name: terminal-fallback\ndescription: hidden: terminal is there\n"
          "metadata:\n  hermes:\n    fallback_for_toolsets: [terminal]")
    skill("gate/tools", "name: tool-gated\ndescription: requires_tools and fallback_for_tools\nmetadata:\n"
          "  hermes:\n    requires_tools: [skill_view]\n    fallback_for_tools: [web_search]\n"
          "    tags: [a, b]\n    related_skills: [deploy-prod]")
    skill("text/long", "name: long-desc\ndescription: " + "word " * 260)
    skill("text/folded", "name: folded\ndescription: >\n  Folded text\n  over two lines\ntags: '[x, \"y\"]'")
    skill("text/nodesc", "name: no-description", "# Title\n\nThe first line of the body.\n")
    _write(root, "text/crlf/SKILL.md", "---\r\nname: crlf\r\ndescription: Windows line ends\r\n---\r\n\r\nBody.\r\n")
    skill("text/big", "name: big\ndescription: a large skill", "x" * 120_000 + "\n")
    skill("setup/keys", "name: needs-keys\ndescription: setup fields\ncompatibility: Needs curl\n"
          "required_environment_variables:\n  - name: API_TOKEN\n    prompt: Your token\n    help: https://x.test\n"
          "  - name: OPTIONAL_ONE\n    optional: true\nprerequisites:\n  env_vars: [LEGACY_KEY]\n"
          "setup:\n  help: Ask the admin\n  collect_secrets:\n    - env_var: SECRET_ONE\n      prompt: Secret?\n"
          "required_credential_files:\n  - google_token.json\n  - path: other.json")
    skill("guide", "name: guide\ndescription: a skill named like a flat file elsewhere")
    skill(".hidden-cat/dotted", "name: dotted\ndescription: in a dot folder")
    skill("scripts/tool", "name: scripts-tool\ndescription: a category called scripts")
    skill("links/real", "name: linked\ndescription: has a link to another skill's file")
    os.symlink("../../ops/deploy/notes.md", root / "links/real/shared-notes.md")
    skill("hidden/folder", "name: hidden-one\ndescription: hidden by its name, viewed by its folder")
    skill("birds/canary", "name: yellow-bird\ndescription: its folder is named like a hidden skill")


#: name -> (how to build it, the skills the ``without`` arm hides, every name form of every skill?)
LIBRARIES: dict[str, tuple[Callable[[Path], None], tuple[str, ...], bool]] = {
    "hermes-bundled": (_sdist("skills"), ("github-pr-workflow", "serving-llms-vllm"), False),
    "hermes-optional": (_sdist("optional-skills"), ("here.now", "peft-fine-tuning"), False),
    "anthropic-shaped": (_anthropic, ("docx",), True),
    "edge-cases": (_edges, ("hidden-one", "mac-only", "canary"), True),
}


# -- the calls -------------------------------------------------------------------


def _views(library: Library, hidden: tuple[str, ...], thorough: bool) -> list[tuple[Any, Any]]:
    """Each skill by its name; by the other name forms (all of them when
    ``thorough``, else one form for every other skill, in turn, so a large
    library still tries every form); some of its files (every third skill
    when not ``thorough``); its flat files looked up as skills; lookups that fail.
    (Hermes walks and parses the whole library at every lookup: a sample keeps
    the large libraries fast.)"""
    calls: list[tuple[Any, Any]] = []
    for number, skill in enumerate(library.skills):
        rel = skill.folder.relative_to(library.root).as_posix()
        forms = list(dict.fromkeys([skill.folder.name, rel, f"{rel}/SKILL.md", f"{rel}/SKILL",
                                    f"{skill.category}:{skill.folder.name}"]))
        if not thorough:
            forms = forms[(number // 2) % len(forms):][:1] if number % 2 == 0 else []
        calls += [(form, None) for form in [skill.name, *forms]]
        listing = sorted(skill.listing())
        others = [f for f in listing if f != "SKILL.md" and not is_junk(f.rsplit("/", 1)[-1])]
        if thorough:
            picked = others[:3] + others[-1:]
        else:
            picked = others[(number // 3) % max(1, len(others)):][:1] if number % 3 == 0 else []
        calls += [(skill.name, file_path) for file_path in picked]
        for stem in sorted({f[:-3] for f in listing if f.endswith(".md") and "/" not in f and f != "SKILL.md"}):
            calls.append((stem, None))  # a flat file of the skill, looked up as a skill
        if thorough or number % 8 == 0:
            calls.append((skill.name, "no/such-file.md"))
    first = library.skills[0]
    top = sorted(first.listing())
    folders = sorted({f.split("/", 1)[0] for f in top if "/" in f})
    calls += [(first.name, folders[0]) if folders else (first.name, "."),
              (first.name, "../" + first.folder.name + "/SKILL.md"), (first.name, "/etc/passwd"),
              (first.name, SKILLS_ROOT + "/" + first.folder.relative_to(library.root).as_posix() + "/SKILL.md"),
              ("no-such-skill", None), ("", None), ("../outside", None), ("/abs/skill", None),
              ("C:\\skills\\x", None), ("bad ns:x", None), ("ns:", None), (":x", None), (5, None),
              ("x" * 300, None)]  # Hermes' OSError, its host path shown as the sandbox's
    for name in hidden:
        calls += [(name, None), (name, "SKILL.md")]
    return calls


def _on_our_side(library: Library, hidden: frozenset[str], categories: list[Any],
                 views: list[tuple[Any, Any]]) -> dict[str, Any]:
    visible = library.visible(hidden)
    return {"index": render_system_prompt(visible, hidden),
            "lists": [skills_list(library, hidden, c) for c in categories],
            "views": [view_skill(library, hidden, name, file_path).text for name, file_path in views]}


def _start_hermes_side(python: str, home: Path, hidden: tuple[str, ...], categories: list[Any],
                       views: list[tuple[Any, Any]]) -> Callable[[], dict[str, Any]]:
    """Start real Hermes on the library; the returned function waits for its answers."""
    (home / "config.yaml").write_text(json.dumps({"skills": {"disabled": list(hidden)}}), encoding="utf-8")
    spec = home.parent / "spec.json"
    out = home.parent / "hermes.json"
    skills = str(home / "skills")
    host_views = [(name, skills + file_path[len(SKILLS_ROOT):]
                   if isinstance(file_path, str) and file_path.startswith(SKILLS_ROOT + "/") else file_path)
                  for name, file_path in views]  # an absolute path in the library, as Hermes' host sees it
    spec.write_text(json.dumps({"tools": sorted(TOOLSETS), "toolsets": sorted(set(TOOLSETS.values())),
                                "categories": categories, "views": host_views}), encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home.parent / "user"),
           "HERMES_HOME": str(home), "LANG": "C.UTF-8"}
    proc = subprocess.Popen([python, "-c", HERMES_SIDE, str(spec), str(out)], env=env, cwd=home.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def answers() -> dict[str, Any]:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr[-3000:]
        text = out.read_text(encoding="utf-8")
        for prefix in {skills, os.path.realpath(skills)}:
            text = text.replace(json.dumps(prefix)[1:-1], SKILLS_ROOT)
        return json.loads(text)

    return answers


def _block(prompt: str) -> str:
    """The ``<available_skills>`` block of a system prompt ("" when there is none)."""
    start, end = prompt.find("<available_skills>"), prompt.find("</available_skills>")
    return prompt[start:end] if start >= 0 else ""


def _normalized(answer: str) -> Any:
    """A tool answer with the documented differences undone: the order within a
    ``linked_files`` / ``available_files`` / ambiguous ``matches`` list (Hermes':
    the filesystem's; ours: sorted) and operating-system litter, which Hermes
    lists and the court leaves out."""
    data = json.loads(answer)
    if isinstance(data, dict) and isinstance(data.get("matches"), list):
        data["matches"] = sorted(data["matches"])
    for key in ("linked_files", "available_files"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            groups = {k: sorted(v for v in vs if not is_junk(v.rsplit("/", 1)[-1])) for k, vs in data[key].items()}
            data[key] = {k: v for k, v in groups.items() if v} or (None if key == "linked_files" else {})
    return data


def differences(ours: dict[str, Any], theirs: dict[str, Any], views: list[tuple[Any, Any]],
                categories: list[Any]) -> list[str]:
    """Every place where the built-in agent's answer is not Hermes'."""
    out = []
    intro = ours["index"].split("## Skills (mandatory)\n", 1)[-1].split("\n", 1)[0]
    closing = "\n</available_skills>\n\nOnly proceed without loading a skill if genuinely none are relevant to the task."
    if not intro.startswith("Before replying") or intro not in theirs["index"] or closing not in ours["index"] \
            or closing not in theirs["index"]:
        out.append("index: the text around the skills is not Hermes'")
    if _block(ours["index"]) != _block(theirs["index"]):
        mine, real = _block(ours["index"]).splitlines(), _block(theirs["index"]).splitlines()
        extra = [line for line in mine if line not in real][:3]
        missing = [line for line in real if line not in mine][:3]
        out.append(f"index: ours has {extra}, Hermes has {missing}")
    for category, mine, real in zip(categories, ours["lists"], theirs["lists"]):
        if _normalized(mine) != _normalized(real):
            out.append(f"skills_list({category!r}): ours {mine[:300]} / Hermes {real[:300]}")
    for call, mine, real in zip(views, ours["views"], theirs["views"]):
        if _normalized(mine) != _normalized(real):
            out.append(f"skill_view{call!r}: ours {mine[:300]} / Hermes {real[:300]}")
    return out


@pytest.mark.parametrize("which", list(LIBRARIES))
def test_the_builtin_agent_shows_a_library_as_hermes_does(tmp_path: Path, which: str) -> None:
    python = _hermes_python()
    build, hidden, thorough = LIBRARIES[which]
    home = tmp_path / "home"
    home.mkdir()
    build(home / "skills")
    library = load_library(home / "skills")
    categories: list[Any] = [None, *sorted({s.category.split("/", 1)[0] for s in library.skills}), "no-such-category"]
    views = _views(library, hidden, thorough)
    hermes = _start_hermes_side(python, home, hidden, categories, views)
    ours = _on_our_side(library, frozenset(hidden), categories, views)
    theirs = hermes()
    assert "<available_skills>" in theirs["index"] and _block(ours["index"])
    found = differences(ours, theirs, views, categories)
    assert not found, f"{len(found)} differences from Hermes {HERMES_VERSION}:\n" + "\n".join(found[:15])
