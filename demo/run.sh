#!/usr/bin/env bash
# The demo trial: install pytest-skillcourt, make sure a sandbox works, and put
# the four demo skills (demo/skills) on trial with their suites (skills_tests/).
#
#   OPENAI_API_KEY=sk-...   bash demo/run.sh            # openai/gpt-4.1-mini
#   ANTHROPIC_API_KEY=...   bash demo/run.sh            # anthropic/claude-sonnet-4-5
#   OPENROUTER_API_KEY=...  bash demo/run.sh            # openrouter/openai/gpt-4.1-mini
#   SKILL_COURT_MODEL=ollama/qwen2.5:7b bash demo/run.sh -k sales
#
# Extra arguments go to pytest.  Sandboxes: Docker when an engine answers (the
# image python:3.12-slim is pulled once), else bubblewrap, installed here if
# missing.  Results: the terminal table, .skill-court/demo.json, the store
# .skill-court/court.db (a second run replays nothing that did not change).
set -euo pipefail
cd "$(dirname "$0")/.."

model="${SKILL_COURT_MODEL:-}"
if [ -z "$model" ]; then
  if [ -n "${OPENAI_API_KEY:-}" ]; then model=openai/gpt-4.1-mini
  elif [ -n "${ANTHROPIC_API_KEY:-}" ]; then model=anthropic/claude-sonnet-4-5
  elif [ -n "${OPENROUTER_API_KEY:-}" ]; then model=openrouter/openai/gpt-4.1-mini
  else
    cat >&2 <<'TXT'
demo/run.sh: no model configured. The trial needs a real model; set one of:
  OPENAI_API_KEY=...                      (uses openai/gpt-4.1-mini)
  ANTHROPIC_API_KEY=...                   (uses anthropic/claude-sonnet-4-5)
  OPENROUTER_API_KEY=...                  (uses openrouter/openai/gpt-4.1-mini)
  SKILL_COURT_MODEL=ollama/qwen2.5:7b     (a local Ollama server)
  SKILL_COURT_MODEL=custom/NAME SKILL_COURT_BASE_URL=http://HOST:PORT/v1   (any OpenAI-compatible server)
TXT
    exit 2
  fi
fi

echo "== installing pytest-skillcourt"
python3 -m pip install -q --disable-pip-version-check -e '.[xdist]'

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
if docker info >/dev/null 2>&1; then
  sandbox=docker
else
  if ! command -v bwrap >/dev/null 2>&1; then
    echo "== no Docker engine answers; installing bubblewrap for local sandboxes"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null
  fi
  sandbox=local
fi

args=(--skill-court skills_tests --skill-court-model "$model" --skill-court-sandbox "$sandbox"
      --skill-court-json .skill-court/demo.json -p no:cacheprovider)
[ -n "${SKILL_COURT_BASE_URL:-}" ] && args+=(--skill-court-base-url "$SKILL_COURT_BASE_URL")
python3 -c "import xdist" 2>/dev/null && args+=(-n 4)
echo "== pytest ${args[*]} $*"
exec python3 -m pytest "${args[@]}" "$@"
