#!/usr/bin/env bash
# The demo trial: install pytest-skillcourt, make sure a sandbox works, and put
# the four demo skills (demo/skills) on trial with their suites (skills_tests/).
#
#   OPENAI_API_KEY=sk-...   bash demo/run.sh            # openai/gpt-4.1-mini
#   ANTHROPIC_API_KEY=...   bash demo/run.sh            # anthropic/claude-sonnet-4-5
#   OPENROUTER_API_KEY=...  bash demo/run.sh            # openrouter/openai/gpt-4.1-mini
#   SKILL_COURT_MODEL=ollama/qwen2.5:7b bash demo/run.sh -k sales
#   bash demo/run.sh --check    # say which model and sandbox it would use, and stop
#
# Extra arguments go to pytest.  The plugin goes into its own virtual
# environment, .venv-demo (pip may not install into the system python3: PEP
# 668).  Sandboxes: Docker when an engine answers and has the image
# python:3.12-slim or can pull it (once), else bubblewrap, installed here if
# missing.  --check may pull the image too (that is how it knows), and
# installs nothing.  Results: the terminal table, .skill-court/demo.json, the
# store .skill-court/court.db (a second run replays nothing that did not change).
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi

#: The demo suites name no image: the plugin's default (options.DEFAULT_IMAGE).
IMAGE=python:3.12-slim
VENV=.venv-demo

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

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

# apt_install WHY PACKAGE...: install Debian/Ubuntu packages, or say what is missing.
apt_install() {
  local why="$1"; shift
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "demo/run.sh: $why, and there is no apt-get here. Fix: install $* with your package manager." >&2
    exit 1
  fi
  echo "== $why; installing $*"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# The sandbox: Docker only when it answers AND has (or can pull) the image; an
# engine with no way to a registry would fail every run.  Sets sandbox and why.
if ! command -v docker >/dev/null 2>&1; then
  sandbox=local why="no docker command"
elif ! docker info >/dev/null 2>&1; then
  sandbox=local why="no Docker engine answers"
elif docker image inspect "$IMAGE" >/dev/null 2>&1; then
  sandbox=docker why="Docker has $IMAGE"
else
  echo "== pulling $IMAGE for the Docker sandbox"
  if pulled=$(docker pull "$IMAGE" 2>&1 >/dev/null); then  # its error alone (stderr)
    sandbox=docker why="Docker pulled $IMAGE"
  else
    first=$(printf '%s\n' "$pulled" | grep -m1 . | cut -c1-160 || true)
    sandbox=local why="Docker answers but cannot pull $IMAGE (${first:-no reason given})"
  fi
fi
[ "$sandbox" = local ] && echo "== $why; using bubblewrap (--skill-court-sandbox local)"

if [ "$check" = 1 ]; then
  echo "model: $model"
  echo "sandbox: $sandbox ($why)"
  exit 0
fi

if [ "$sandbox" = local ] && ! command -v bwrap >/dev/null 2>&1; then
  apt_install "bubblewrap is not installed" bubblewrap
fi

py="$VENV/bin/python"
if ! "$py" -c "" >/dev/null 2>&1; then
  echo "== creating $VENV (the demo's own Python environment)"
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"  # Debian/Ubuntu ship python3 without ensurepip: python3-venv has it
    apt_install "python3 -m venv does not work here" python3-venv
    python3 -m venv "$VENV"
  fi
fi
echo "== installing pytest-skillcourt into $VENV"
"$py" -m pip install -q --disable-pip-version-check -e '.[xdist]'

args=(--skill-court skills_tests --skill-court-model "$model" --skill-court-sandbox "$sandbox"
      --skill-court-json .skill-court/demo.json -p no:cacheprovider)
[ -n "${SKILL_COURT_BASE_URL:-}" ] && args+=(--skill-court-base-url "$SKILL_COURT_BASE_URL")
"$py" -c "import xdist" 2>/dev/null && args+=(-n 4)
echo "== $py -m pytest ${args[*]} $*"
exec "$py" -m pytest "${args[@]}" "$@"
