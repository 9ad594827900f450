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
# A local vLLM worker unless an external fleet is configured (INFERENCE_AUTOSTART=0 to skip).
# Workers are detached engines registered in the DB, so they are stopped by command on exit.
autostart=${INFERENCE_AUTOSTART:-1}
[ -n "${INFERENCE_WORKERS:-}" ] && autostart=0
cleanup() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    if [ "$autostart" = 1 ]; then
        $PY manage.py inference_workers stop --drain-timeout 5 >>var/log/inference.log 2>&1 || true
    fi
    wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

$PY manage.py qcluster >>var/log/qcluster.log 2>&1 &
pids+=($!)

if [ "$autostart" = 1 ]; then
    echo "Starting a local inference worker in the background (~30 s; var/log/inference.log)"
    $PY manage.py inference_workers start >>var/log/inference.log 2>&1 &
fi

echo "Supportbot is serving at http://$HOST:$PORT/ (readiness: http://$HOST:$PORT/readyz)"
echo "  API docs: http://$HOST:$PORT/api/docs/   admin: http://$HOST:$PORT/admin/"
echo "  Logs of background services: var/log/"
$PY -m daphne -b "$HOST" -p "$PORT" --proxy-headers supportbot.asgi:application &
pids+=($!)
wait -n "${pids[@]}"
