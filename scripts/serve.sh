#!/usr/bin/env bash
# The model service on a local Ray Serve instance, and the page in front of it (docs/scaling.md):
#   scripts/serve.sh [--replicas N] [other model_service.deploy.ray_serve options]
# Service on http://127.0.0.1:${NTP_SERVICE_PORT:-8000}, page on http://127.0.0.1:${NTP_PORT:-7860}. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
stamp=.venv/.installed-scale-$(sha1sum requirements-scale.txt | cut -c1-12)
[ -f "$stamp" ] || { .venv/bin/python -m pip install --quiet -r requirements-scale.txt && touch "$stamp"; }
port=${NTP_SERVICE_PORT:-8000}
.venv/bin/python -m model_service.deploy.ray_serve --port "$port" "$@" &
service=$!
trap 'kill $service 2>/dev/null; .venv/bin/ray stop --force >/dev/null 2>&1 || true' EXIT
echo "waiting for the model service on port $port ..."
until curl -sf "http://127.0.0.1:$port/info" >/dev/null; do
  kill -0 $service 2>/dev/null || { echo "error: the model service did not start" >&2; exit 1; }
  sleep 2
done
.venv/bin/python app.py --service "http://127.0.0.1:$port"
