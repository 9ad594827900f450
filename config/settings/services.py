"""PostgreSQL, Redis (cache, channel layer, rate limits) and the django-q2 cluster.

With no `DATABASE_URL` / `REDIS_URL` these name the embedded servers under `var/` (started
by `manage.py services start`, never here); in production both URLs are set.
"""

from config.env import env
from config.settings.base import DATABASE_URL_FROM_ENV
from supportbot import devservices

EMBEDDED_POSTGRES = not DATABASE_URL_FROM_ENV
_database_url = DATABASE_URL_FROM_ENV
if EMBEDDED_POSTGRES:
    # `make run`'s web and worker processes (scripts/run.sh) connect as the embedded server's
    # non-superuser runtime role (granted by `manage.py services start`); migrations, seeds
    # and tests as the owner.
    _runtime_role = env.str("SUPPORTBOT_DB_ROLE", default="owner") == "app"
    _database_url = devservices.postgres_url_expected(
        role=devservices.APP_ROLE if _runtime_role else None
    )
_redis_url = env.str("REDIS_URL", default="")
EMBEDDED_REDIS = not _redis_url
if EMBEDDED_REDIS:
    # Tests use another database number so they never feed the dev qcluster's queue.
    _redis_url = devservices.valkey_url(db=env.int("SUPPORTBOT_REDIS_DB", default=0))

REDIS_URL = _redis_url
# A connection pool per process (psycopg_pool): threads of concurrent turns and socket events
# borrow connections and give them back when Django closes them, so one process never holds
# more than DB_POOL_MAX_SIZE connections however many chats it serves (waiting up to
# DB_POOL_TIMEOUT_S for one). DB_POOL_MAX_SIZE=0 turns pooling off.
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=20)
DB_POOL_CHECK = env.bool("DB_POOL_CHECK", default=True)


def _database(url: str, *, pool_timeout: float) -> dict:
    config = env.db_url_config(url)
    config["ENGINE"] = "django.db.backends.postgresql"
    if not config["HOST"] and "host" in config["OPTIONS"]:
        # A unix-socket URL (postgresql://user@/db?host=/dir) names its host as a query option.
        config["HOST"] = config["OPTIONS"].pop("host")
    config["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=0)
    config["CONN_HEALTH_CHECKS"] = True
    if DB_POOL_MAX_SIZE > 0 and config["CONN_MAX_AGE"] == 0:
        # With a pool Django's health check becomes the pool's: each connection handed out is
        # checked first (an empty query), so after PostgreSQL restarts no request or task
        # fails on a connection the restart cut. DB_POOL_CHECK=0 saves that round trip.
        config["CONN_HEALTH_CHECKS"] = DB_POOL_CHECK
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": DB_POOL_MAX_SIZE,
            "timeout": pool_timeout,
        }
    return config


DATABASES = {
    "default": _database(_database_url, pool_timeout=env.float("DB_POOL_TIMEOUT_S", default=20.0))
}
# A read replica (a streaming standby) for stale-tolerant reads: history pages, the console's
# lists, analytics and search opt in (supportbot.replicas); everything else stays on the
# primary. A failing replica is skipped for DATABASE_REPLICA_RETRY_S and reads fall back.
DATABASE_REPLICA_URL = env.str("DATABASE_REPLICA_URL", default="")
DATABASE_REPLICA_RETRY_S = env.float("DATABASE_REPLICA_RETRY_S", default=10.0)
DATABASE_ROUTERS = ["supportbot.replicas.ReplicaRouter"]
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = _database(
        DATABASE_REPLICA_URL, pool_timeout=env.float("DB_REPLICA_TIMEOUT_S", default=2.0)
    )
    # Health-check pooled replica connections (a standby restarts on its own), never write.
    DATABASES["replica"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["replica"]["OPTIONS"].setdefault("connect_timeout", 2)
    DATABASES["replica"]["OPTIONS"]["options"] = "-c default_transaction_read_only=on"
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "sb",
        # Fail fast when Redis is unreachable (callers treat it as a miss).
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
}
CHANNEL_LAYERS = {
    "default": {
        # channels-redis, waiting out Redis outages instead of closing sockets
        # (supportbot/channel_layer.py).
        "BACKEND": "supportbot.channel_layer.ResilientRedisChannelLayer",
        # redis-py 8 defaults socket_timeout to 5 s, the same as channels-redis' blocking
        # BZPOPMIN timeout: idle consumers then die with TimeoutError. Read longer.
        "CONFIG": {
            # redis-py 8's asyncio pool refuses (MaxConnectionsError) past 100 connections
            # instead of waiting: a burst of session starts or answers on one process needs
            # more (Valkey/Redis allow 10,000 clients by default).
            "hosts": [
                {
                    "address": REDIS_URL,
                    "socket_timeout": 30,
                    "max_connections": env.int("CHANNEL_LAYER_MAX_CONNECTIONS", default=2000),
                }
            ],
            "prefix": "sb:ch",
            "capacity": 500,
            # Every socket of a daphne process receives through one Redis channel
            # ("specific.<process>!"), and group_send silently drops events for a channel at
            # capacity: ten chats streaming 150 deltas behind a held-up pump lost most of them
            # at 500 (supportbot/tests/test_channel_layer.py). Undelivered events still expire
            # after 60 s.
            "channel_capacity": {
                "specific.*": env.int("CHANNEL_LAYER_PROCESS_CAPACITY", default=20000)
            },
        },
    }
}
Q_CLUSTER = {
    "name": "supportbot",
    "workers": env.int("Q_WORKERS", default=2),
    # A worker exits after this many tasks and the cluster forks a new one (supportbot.db_fork
    # keeps the parent's database connections out of it).
    "recycle": env.int("Q_RECYCLE", default=200),
    "timeout": env.int("Q_TIMEOUT", default=600),
    "retry": env.int("Q_RETRY", default=660),
    "max_attempts": 3,
    "ack_failures": True,
    "catch_up": False,
    "redis": REDIS_URL,
    "orm": None,
    # Lets `Q_CLUSTER_NAME=<name>` run a cluster on a private queue (tests do).
    "ALT_CLUSTERS": {},
}
