#!/usr/bin/env bash
# Serve the whole product: background worker(s) plus daphne in the foreground.
# Every child is stopped when this script exits (Ctrl-C, SIGTERM or a crash of daphne).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
mkdir -p var/log

pids=()
cleanup() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

$PY manage.py qcluster >>var/log/qcluster.log 2>&1 &
pids+=($!)

echo "Supportbot is serving at http://$HOST:$PORT/ (readiness: http://$HOST:$PORT/readyz)"
echo "  API docs: http://$HOST:$PORT/api/docs/   admin: http://$HOST:$PORT/admin/"
echo "  Logs of background services: var/log/"
$PY -m daphne -b "$HOST" -p "$PORT" --proxy-headers supportbot.asgi:application &
pids+=($!)
wait -n "${pids[@]}"
