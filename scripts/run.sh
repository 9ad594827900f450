#!/usr/bin/env bash
# Serve the whole product: background worker(s), the demo order service, a local vLLM worker
# (unless an external fleet is configured) and daphne.
# Each child runs in its own process group; all are stopped (TERM, then KILL after a grace
# period) when this script exits: Ctrl-C, SIGTERM, or any child dying.
set -euo pipefail
set -m
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
GRACE=${STOP_GRACE_SECONDS:-10}
# A developer's stack over plain http unless told otherwise (config/settings/base.py).
export SUPPORTBOT_ENV=${SUPPORTBOT_ENV:-development}
# Daphne's default keeps a WebSocket open 24 h; pages reconnect, so an hour is plenty.
WEBSOCKET_TIMEOUT=${DAPHNE_WEBSOCKET_TIMEOUT_S:-3600}
LOG_DIR=${SUPPORTBOT_LOG_DIR:-var/log}
mkdir -p "$LOG_DIR"

# Embedded services up, development keys written, the runtime role granted on the tables
# `make run` just migrated (idempotent; a no-op for external DATABASE_URL / REDIS_URL).
$PY manage.py services start >/dev/null

# Web and worker processes connect as the embedded PostgreSQL's runtime role (no superuser,
# owns no table: it cannot disable the audit trail's triggers); `make run` migrated as owner.
export SUPPORTBOT_DB_ROLE=${SUPPORTBOT_DB_ROLE:-app}

pids=()
# A local vLLM worker unless an external fleet is configured (INFERENCE_AUTOSTART=0 to skip).
# Workers are detached engines registered in the DB, so they are stopped by command on exit.
autostart=${INFERENCE_AUTOSTART:-1}
[ -n "${INFERENCE_WORKERS:-}" ] && autostart=0
[ -n "${INFERENCE_DISCOVERY:-}" ] && autostart=0
cleanup() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    if [ "$autostart" = 1 ]; then
        $PY manage.py inference_workers stop --drain-timeout 5 >>"$LOG_DIR/inference.log" 2>&1 || true
    fi
    for _ in $(seq $((GRACE * 10))); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

start() {  # start NAME CMD...: run CMD in the background, logging to $LOG_DIR/NAME.log
    local name=$1; shift
    "$@" >>"$LOG_DIR/$name.log" 2>&1 &
    pids+=($!)
}

start qcluster $PY manage.py qcluster
# The demo tenant's order system (demo/orders): its own ASGI app, port and SQLite file.
start ordersvc $PY -m demo.orders

if [ "$autostart" = 1 ]; then
    echo "Starting a local inference worker in the background (~30 s; $LOG_DIR/inference.log)"
    $PY manage.py inference_workers start >>"$LOG_DIR/inference.log" 2>&1 &
fi

echo "Supportbot is serving at http://$HOST:$PORT/ (readiness: http://$HOST:$PORT/readyz)"
echo "  Customer chat: http://$HOST:$PORT/chat/acme/   agent console: http://$HOST:$PORT/console/"
echo "  API docs: http://$HOST:$PORT/api/docs/   admin: http://$HOST:$PORT/admin/   ops: http://$HOST:$PORT/console/ops/"
echo "  Order service: http://127.0.0.1:${ORDER_SERVICE_PORT:-8090}/openapi.json"
echo "  Logs: $LOG_DIR/ (daphne.log, qcluster.log, ordersvc.log, inference.log)"
# No --proxy-headers: daphne would trust X-Forwarded-For/-Proto from any client. Django's
# TrustedProxyMiddleware honours them only from TRUSTED_PROXIES.
start daphne $PY -m daphne -b "$HOST" -p "$PORT" --websocket_timeout "$WEBSOCKET_TIMEOUT" \
    "${ASGI_APPLICATION_PATH:-config.asgi:application}"
wait -n "${pids[@]}"
