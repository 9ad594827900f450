#!/usr/bin/env bash
# Serve the whole product: background worker(s) plus daphne.
# Each child runs in its own process group; all are stopped (TERM, then KILL after a grace
# period) when this script exits: Ctrl-C, SIGTERM, or any child dying.
set -euo pipefail
set -m
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
GRACE=${STOP_GRACE_SECONDS:-10}
LOG_DIR=${SUPPORTBOT_LOG_DIR:-var/log}
mkdir -p "$LOG_DIR"

pids=()
cleanup() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for _ in $(seq $((GRACE * 10))); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

start() {  # start NAME CMD...: run CMD in the background, logging to var/log/NAME.log
    local name=$1; shift
    "$@" >>"$LOG_DIR/$name.log" 2>&1 &
    pids+=($!)
}

start qcluster $PY manage.py qcluster
# The demo tenant's order system (demo/orders): its own ASGI app, port and SQLite file.
start ordersvc $PY -m demo.orders

echo "Supportbot is serving at http://$HOST:$PORT/ (readiness: http://$HOST:$PORT/readyz)"
echo "  API docs: http://$HOST:$PORT/api/docs/   admin: http://$HOST:$PORT/admin/"
echo "  Actions console: http://$HOST:$PORT/console/actions/   order service: http://127.0.0.1:${ORDER_SERVICE_PORT:-8090}/openapi.json"
echo "  Logs: $LOG_DIR/ (daphne.log, qcluster.log, ordersvc.log)"
start daphne $PY -m daphne -b "$HOST" -p "$PORT" --proxy-headers supportbot.asgi:application
wait -n "${pids[@]}"
