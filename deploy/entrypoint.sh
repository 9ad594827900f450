#!/bin/sh
# The image's roles: web (daphne), worker (django-q2 cluster), migrate (one-shot),
# orders (the demo order service), seed-demo, manage <args>, or any command.
set -eu
role=${1:-web}
[ $# -gt 0 ] && shift
case "$role" in
    web)
        # No --proxy-headers: TRUSTED_PROXIES decides whose X-Forwarded-* count.
        # Sockets live at most an hour (daphne's default is 24 h); pages reconnect.
        exec daphne -b "${BIND:-0.0.0.0}" -p "${PORT:-8000}" \
            --application-close-timeout "${DAPHNE_CLOSE_TIMEOUT_S:-10}" \
            --websocket_timeout "${DAPHNE_WEBSOCKET_TIMEOUT_S:-3600}" \
            config.asgi:application "$@" ;;
    worker)
        exec python manage.py qcluster "$@" ;;
    migrate)
        exec python manage.py migrate --noinput "$@" ;;
    seed-demo)
        exec python manage.py seed_demo "$@" ;;
    orders)
        ORDER_SERVICE_HOST=${ORDER_SERVICE_HOST:-0.0.0.0} exec python -m demo.orders "$@" ;;
    manage)
        exec python manage.py "$@" ;;
    *)
        exec "$role" "$@" ;;
esac
