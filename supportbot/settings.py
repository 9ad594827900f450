"""The one settings module, driven by environment variables (django-environ).

With no `DATABASE_URL` / `REDIS_URL`, the embedded PostgreSQL and Valkey under `var/` are
started (idempotently) and used: that is the default for `make run` and tests. In production
set both URLs and nothing embedded starts.
"""

import os
import warnings
from pathlib import Path

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from supportbot import devservices, keys
from supportbot.middleware import parse_networks

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
env_file = BASE_DIR / ".env"
if env_file.exists():
    environ.Env.read_env(str(env_file))

DEBUG = env.bool("DJANGO_DEBUG", default=False)
VAR_DIR = devservices.var_dir()
# The embedded services of `make run` and tests (no DATABASE_URL, or one naming the embedded
# server's socket under var/, as test stacks do) mean a developer's machine served over plain
# http. Everything else is production and gets the secure defaults.
_database_url = env.str("DATABASE_URL", default="")
EMBEDDED_DEV = not _database_url or devservices.is_embedded_postgres_url(_database_url)
DEV_HTTP = DEBUG or EMBEDDED_DEV

# The root secret. Development generates a random one once into var/secret-key (0600);
# production must set it. This check runs before anything embedded starts.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEV_HTTP:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. Production (DJANGO_DEBUG off, a DATABASE_URL) "
            "needs a long random secret, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(64))'`."
        )
    SECRET_KEY = keys.dev_secret_key(VAR_DIR)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --------------------------------------------------------------------------- services
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on servers
    EMBEDDED_POSTGRES = not _database_url
    if EMBEDDED_POSTGRES:
        _database_url = devservices.postgres_start()
        # `make run`'s web and worker processes (scripts/run.sh) connect as the embedded
        # server's non-superuser runtime role; migrations, seeds and tests as the owner.
        if env.str("SUPPORTBOT_DB_ROLE", default="owner") == "app":
            _database_url = devservices.postgres_app_role_grant()
    _redis_url = env.str("REDIS_URL", default="")
    EMBEDDED_REDIS = not _redis_url
    if EMBEDDED_REDIS:
        # Tests use another database number so they never feed the dev qcluster's queue.
        _redis_url = devservices.valkey_start(db=env.int("SUPPORTBOT_REDIS_DB", default=0))

REDIS_URL = _redis_url
# A connection pool per process (psycopg_pool): threads of concurrent turns and socket events
# borrow connections and give them back when Django closes them, so one process never holds
# more than DB_POOL_MAX_SIZE connections however many chats it serves (waiting up to
# DB_POOL_TIMEOUT_S for one). DB_POOL_MAX_SIZE=0 turns pooling off.
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=20)


def _database(url: str, *, pool_timeout: float) -> dict:
    config = env.db_url_config(url)
    config["ENGINE"] = "django.db.backends.postgresql"
    if not config["HOST"] and "host" in config["OPTIONS"]:
        # A unix-socket URL (postgresql://user@/db?host=/dir) names its host as a query option.
        config["HOST"] = config["OPTIONS"].pop("host")
    config["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=0)
    config["CONN_HEALTH_CHECKS"] = True
    if DB_POOL_MAX_SIZE > 0 and config["CONN_MAX_AGE"] == 0:
        config["CONN_HEALTH_CHECKS"] = False  # the pool checks connections itself
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
    "recycle": 200,
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

# --------------------------------------------------------------------------- apps
INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "channels",
    "django_q",
    "django_prometheus",
    "supportbot",
    "knowledge",
    "inference",
    "conversations",
    "actions",
    "handoffs",
]

MIDDLEWARE = [
    # HTTP metrics (django-prometheus: requests, latency, status by view) beside ours at
    # /metrics; the request id binds first so every later log line carries it.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "supportbot.observability.middleware.RequestContextMiddleware",
    "supportbot.middleware.TrustedProxyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "supportbot.input_guard.BadInputMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "supportbot.urls"
ASGI_APPLICATION = "supportbot.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/console/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))
MEDIA_URL = "/media/"

_s3_bucket = env.str("AWS_STORAGE_BUCKET_NAME", default="")
STORAGES = {
    "default": {
        "BACKEND": "storages.backends.s3.S3Storage"
        if _s3_bucket
        else "django.core.files.storage.FileSystemStorage",
    },
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}
if _s3_bucket:
    AWS_STORAGE_BUCKET_NAME = _s3_bucket
    AWS_S3_ENDPOINT_URL = env.str("AWS_S3_ENDPOINT_URL", default=None)
WHITENOISE_USE_FINDERS = True

# --------------------------------------------------------------------------- API
REST_FRAMEWORK = {
    # The partner API takes API keys only; console endpoints name SessionAuthentication
    # themselves (an agent's browser session must never act as a partner).
    "DEFAULT_AUTHENTICATION_CLASSES": ["supportbot.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "supportbot.schema.AutoSchema",
    "EXCEPTION_HANDLER": "supportbot.exceptions.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "supportbot.exceptions.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "UNAUTHENTICATED_USER": None,
    # Per-key (console: per-user) request rate, RATE_LIMITS["api_key"/"api_user"].
    "DEFAULT_THROTTLE_CLASSES": ["supportbot.throttling.RequestRateThrottle"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Supportbot API",
    "DESCRIPTION": "Partner API: conversations, messages, handoffs, feedback and knowledge.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from our own static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "COMPONENT_SPLIT_REQUEST": True,
}
API_KEY_LAST_USED_RESOLUTION_SECONDS = env.int("API_KEY_LAST_USED_RESOLUTION_SECONDS", default=60)

# --------------------------------------------------------------------------- abuse limits
# supportbot/ratelimit.py: "<count>/<seconds>" per key, counted in Redis; with Redis down each
# process counts alone and allows count / RATE_LIMIT_FALLBACK_DIVISOR. 429 + Retry-After.
RATE_LIMITS_ENABLED = env.bool("RATE_LIMITS_ENABLED", default=True)
RATE_LIMIT_FALLBACK_DIVISOR = env.int("RATE_LIMIT_FALLBACK_DIVISOR", default=2)
RATE_LIMIT_REDIS_TIMEOUT_S = env.float("RATE_LIMIT_REDIS_TIMEOUT_S", default=0.25)
RATE_LIMIT_REDIS_RETRY_S = env.float("RATE_LIMIT_REDIS_RETRY_S", default=5.0)
RATE_LIMITS = {
    # New anonymous chats (session.start without a valid visitor token) per client IP + tenant.
    "session_anonymous": env.str("RATE_LIMIT_SESSION_ANONYMOUS", default="30/600"),
    # Customer messages per customer, per conversation, and (anonymous visitors) per IP +
    # tenant, so a new visitor token per message does not reset the count.
    "message_customer": env.str("RATE_LIMIT_MESSAGE_CUSTOMER", default="20/60"),
    "message_conversation": env.str("RATE_LIMIT_MESSAGE_CONVERSATION", default="20/60"),
    "message_ip": env.str("RATE_LIMIT_MESSAGE_IP", default="60/60"),
    # Handoff requests per conversation and per customer.
    "handoff_conversation": env.str("RATE_LIMIT_HANDOFF_CONVERSATION", default="3/600"),
    "handoff_customer": env.str("RATE_LIMIT_HANDOFF_CUSTOMER", default="5/3600"),
    # Partner API: every request per key (console API: per user), uploads and searches per key.
    "api_key": env.str("RATE_LIMIT_API_KEY", default="600/60"),
    "api_user": env.str("RATE_LIMIT_API_USER", default="600/60"),
    "upload_key": env.str("RATE_LIMIT_UPLOAD_KEY", default="60/3600"),
    "search_key": env.str("RATE_LIMIT_SEARCH_KEY", default="120/60"),
    # Failed logins per user name and per IP; past them a lock that doubles per failure.
    "login_user": env.str("RATE_LIMIT_LOGIN_USER", default="5/900"),
    "login_ip": env.str("RATE_LIMIT_LOGIN_IP", default="20/900"),
}
LOGIN_LOCKOUT_BASE_S = env.int("LOGIN_LOCKOUT_BASE_S", default=30)
LOGIN_LOCKOUT_MAX_S = env.int("LOGIN_LOCKOUT_MAX_S", default=3600)

# --------------------------------------------------------------------------- conversations
ANSWER_CACHE_ENABLED = env.bool("ANSWER_CACHE_ENABLED", default=True)
# A generated answer must show its first verified sentence this soon after the message
# (search included), else the customer gets the extractive answer at once.
ANSWER_FIRST_WORDS_BUDGET_S = env.float("ANSWER_FIRST_WORDS_BUDGET_S", default=0.8)
# A reply left unfinished this long (its process died) is taken over; the sweeper answers
# acknowledged messages whose reply is missing or stuck past it.
ANSWER_STALE_AFTER_S = env.float("ANSWER_STALE_AFTER_S", default=90.0)
# Turns answered at once by one web process (each holds a thread and a database connection
# while it runs); more wait their turn.
ORCHESTRATOR_MAX_CONCURRENT_TURNS = env.int("ORCHESTRATOR_MAX_CONCURRENT_TURNS", default=12)
# Of those, at most this many for one tenant (0: half of them), so a tenant whose order
# system hangs never holds every slot.
ORCHESTRATOR_MAX_TURNS_PER_TENANT = env.int("ORCHESTRATOR_MAX_TURNS_PER_TENANT", default=0)
# `/ws/bench-echo/` (bench/echo.py): the echo reference of `python -m bench.chat_load`.
BENCH_ECHO_ENABLED = env.bool("BENCH_ECHO_ENABLED", default=False)

# --------------------------------------------------------------------------- handoffs
HANDOFF_ESCALATE_AFTER_SECONDS = env.int("HANDOFF_ESCALATE_AFTER_SECONDS", default=300)

# --------------------------------------------------------------------------- knowledge
KNOWLEDGE_EMBEDDINGS_BACKEND = env.str("EMBEDDINGS_BACKEND", default="local")  # local | openai
KNOWLEDGE_EMBEDDINGS_URL = env.str("EMBEDDINGS_URL", default="")
KNOWLEDGE_EMBEDDINGS_MODEL = env.str("EMBEDDINGS_MODEL", default="all-MiniLM-L6-v2")
KNOWLEDGE_EMBEDDINGS_API_KEY = env.str("EMBEDDINGS_API_KEY", default="")
KNOWLEDGE_EMBEDDINGS_TIMEOUT = env.float("EMBEDDINGS_TIMEOUT", default=30.0)
# Local model: concurrent callers' texts are encoded together, one model call at a time, up to
# this many texts per call (0: every caller encodes on its own thread).
KNOWLEDGE_EMBEDDINGS_COALESCE_MAX = env.int("EMBEDDINGS_COALESCE_MAX", default=256)
# A web process loads the local model in the background as it starts (`/readyz` answers 503
# until it has), so the first customer does not wait ~4 s for it.
KNOWLEDGE_EMBEDDINGS_WARMUP = env.bool("EMBEDDINGS_WARMUP", default=True)
KNOWLEDGE_MAX_UPLOAD_BYTES = env.int("KNOWLEDGE_MAX_UPLOAD_BYTES", default=10 * 1024 * 1024)
KNOWLEDGE_STUCK_AFTER_SECONDS = env.int("KNOWLEDGE_STUCK_AFTER_SECONDS", default=900)
KNOWLEDGE_EXACT_SCAN_MAX_ROWS = env.int("KNOWLEDGE_EXACT_SCAN_MAX_ROWS", default=5000)
KNOWLEDGE_MAX_TEXT_CHARS = env.int("KNOWLEDGE_MAX_TEXT_CHARS", default=12_000_000)
KNOWLEDGE_PDF_MAX_PAGES = env.int("KNOWLEDGE_PDF_MAX_PAGES", default=1000)
KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS = env.float("KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS", default=120.0)

# --------------------------------------------------------------------------- logging
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# json (default): one JSON object per line with request_id, conversation_id, trace_id and
# span_id (supportbot.observability.logs); plain: the same fields as text for a terminal.
LOG_FORMAT = env.str("LOG_FORMAT", default="json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "supportbot.observability.logs.ContextFilter"}},
    "formatters": {
        "plain": {
            "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s %(conversation_id)s] "
            "%(message)s"
        },
        "json": {"()": "supportbot.observability.logs.Formatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}

# --------------------------------------------------------------------------- security
# Secure by default; `DEV_HTTP` (DEBUG or the embedded `make run`/test services) is served
# over plain http on loopback, so cookies there are not Secure and nothing redirects.
_secure = not DEV_HTTP
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=_secure)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]  # load-balancer probes over http
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if _secure else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=_secure)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=_secure)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=_secure)
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True  # pages send the token from the form field, never the cookie
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
# Forwarded headers count only from these peers (IPs/CIDRs); TrustedProxyMiddleware drops
# them from anyone else, which is what makes SECURE_PROXY_SSL_HEADER safe to set.
TRUSTED_PROXIES = [str(n) for n in parse_networks(env.list("TRUSTED_PROXIES", default=[]))]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content-Security-Policy on every response (django-csp). Pages load scripts and styles from
# our own static files only; no inline code. The chat page replaces frame-ancestors with the
# tenant's allowed origins (conversations.views.chat_page).
KB_PAGE_STYLE_HASH = "'sha256-wcaq3tiSfBgT+cQHy1sMJIgFit6VcKWu9RKvYVahEto='"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        # The one inline block left: knowledge/templates/knowledge/document_page.html's
        # <style>, allowed by its hash until it moves to a static file (test_security checks).
        "style-src": [SELF, KB_PAGE_STYLE_HASH],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# --------------------------------------------------------------------------- inference
# The vLLM worker pool (inference app). Every value can be set from the environment; the app
# reads them through `inference.config.get_config()`, never at import time.
INFERENCE = {
    # External fleet: comma-separated base URLs, each optionally `url|role|model`.
    "WORKERS": env.str("INFERENCE_WORKERS", default=""),
    # Discovered fleet (Kubernetes endpoints or headless-Service DNS), re-read periodically.
    "DISCOVERY": env.str("INFERENCE_DISCOVERY", default=""),
    "DISCOVERY_INTERVAL_S": env.float("INFERENCE_DISCOVERY_INTERVAL_S", default=5.0),
    "DISCOVERY_TIMEOUT_S": env.float("INFERENCE_DISCOVERY_TIMEOUT_S", default=3.0),
    "DISCOVERY_API_URL": env.str(
        "INFERENCE_DISCOVERY_API_URL",
        default=(
            f"https://{env.str('KUBERNETES_SERVICE_HOST')}:"
            f"{env.str('KUBERNETES_SERVICE_PORT', default='443')}"
            if env.str("KUBERNETES_SERVICE_HOST", default="")
            else ""
        ),
    ),
    "DISCOVERY_TOKEN_PATH": env.str(
        "INFERENCE_DISCOVERY_TOKEN_PATH",
        default="/var/run/secrets/kubernetes.io/serviceaccount/token",
    ),
    "DISCOVERY_CA_PATH": env.str(
        "INFERENCE_DISCOVERY_CA_PATH",
        default="/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
    ),
    "DEVICE": env.str("INFERENCE_DEVICE", default="auto"),  # auto | cpu | gpu
    "VLLM_PYTHON": env.str(
        "INFERENCE_VLLM_PYTHON", default=str(BASE_DIR / ".venv-vllm" / "bin" / "python")
    ),
    "MODEL_DIR": env.str("INFERENCE_MODEL_DIR", default=str(VAR_DIR / "models" / "smollm2-135m")),
    "GPU_MODEL": env.str("INFERENCE_GPU_MODEL", default=""),
    "SERVED_MODEL_NAME": env.str("INFERENCE_SERVED_MODEL_NAME", default="smollm2-135m"),
    "HOST": env.str("INFERENCE_HOST", default="127.0.0.1"),
    "BASE_PORT": env.int("INFERENCE_BASE_PORT", default=8100),
    "MAX_MODEL_LEN": env.int("INFERENCE_MAX_MODEL_LEN", default=4096),
    "MAX_NUM_SEQS": env.int("INFERENCE_MAX_NUM_SEQS", default=16),
    "GPU_MEMORY_UTILIZATION": env.float("INFERENCE_GPU_MEMORY_UTILIZATION", default=0.9),
    "TENSOR_PARALLEL_SIZE": env.int("INFERENCE_TENSOR_PARALLEL_SIZE", default=1),
    "ENABLE_PREFIX_CACHING": env.bool("INFERENCE_ENABLE_PREFIX_CACHING", default=True),
    "CPU_KVCACHE_SPACE_GB": env.int("INFERENCE_CPU_KVCACHE_SPACE_GB", default=2),
    "ENFORCE_EAGER": env.bool("INFERENCE_ENFORCE_EAGER", default=True),
    "START_TIMEOUT_S": env.float("INFERENCE_START_TIMEOUT_S", default=300.0),
    "DRAIN_TIMEOUT_S": env.float("INFERENCE_DRAIN_TIMEOUT_S", default=30.0),
    "POLL_INTERVAL_S": env.float("INFERENCE_POLL_INTERVAL_S", default=1.0),
    "STALE_AFTER_S": env.float("INFERENCE_STALE_AFTER_S", default=3.0),
    "HEALTH_TIMEOUT_S": env.float("INFERENCE_HEALTH_TIMEOUT_S", default=2.0),
    "CONNECT_TIMEOUT_S": env.float("INFERENCE_CONNECT_TIMEOUT_S", default=2.0),
    "FIRST_BYTE_TIMEOUT_S": env.float("INFERENCE_FIRST_BYTE_TIMEOUT_S", default=20.0),
    "IDLE_TIMEOUT_S": env.float("INFERENCE_IDLE_TIMEOUT_S", default=20.0),
    "MAX_ATTEMPTS": env.int("INFERENCE_MAX_ATTEMPTS", default=3),
    "BREAKER_FAILURES": env.int("INFERENCE_BREAKER_FAILURES", default=3),
    "BREAKER_RESET_S": env.float("INFERENCE_BREAKER_RESET_S", default=10.0),
    "QUEUE_DEADLINE_S": env.float("INFERENCE_QUEUE_DEADLINE_S", default=5.0),
    "WORKER_MAX_WAITING": env.int("INFERENCE_WORKER_MAX_WAITING", default=8),
    "WORKER_MAX_KV": env.float("INFERENCE_WORKER_MAX_KV", default=0.95),
    "TENANT_TOKENS_PER_MINUTE": env.int("INFERENCE_TENANT_TOKENS_PER_MINUTE", default=60000),
    "TENANT_TOKEN_BURST": env.int("INFERENCE_TENANT_TOKEN_BURST", default=20000),
    "TENANT_MAX_CONCURRENCY": env.int("INFERENCE_TENANT_MAX_CONCURRENCY", default=8),
    "MAX_INPUT_TOKENS": env.int("INFERENCE_MAX_INPUT_TOKENS", default=3000),
    "MAX_OUTPUT_TOKENS": env.int("INFERENCE_MAX_OUTPUT_TOKENS", default=1024),
    # `/metrics` wants `Authorization: Bearer <METRICS_TOKEN>` (METRICS_BEARER_TOKEN: old name).
    "METRICS_BEARER_TOKEN": env.str("METRICS_TOKEN", default="")
    or env.str("METRICS_BEARER_TOKEN", default=""),
    "CONTINUOUS_USAGE": env.bool("INFERENCE_CONTINUOUS_USAGE", default=True),
    # Verified yield: skip generation for a model that rarely gives an answer its first words
    # (the share of its recent answers that got a verified sentence out within the budget).
    "YIELD_POLICY": env.bool("INFERENCE_YIELD_POLICY", default=True),
    "YIELD_WINDOW": env.int("INFERENCE_YIELD_WINDOW", default=50),
    "YIELD_MIN_SAMPLES": env.int("INFERENCE_YIELD_MIN_SAMPLES", default=10),
    "YIELD_THRESHOLD": env.float("INFERENCE_YIELD_THRESHOLD", default=0.2),
    # A model not measured yet (warming up) is measured by background calls nobody waits for
    # (at most this many at once per process); "foreground" lets that many answers wait on it.
    "YIELD_WARMUP": env.str("INFERENCE_YIELD_WARMUP", default="background"),
    "YIELD_WARMUP_IN_FLIGHT": env.int("INFERENCE_YIELD_WARMUP_IN_FLIGHT", default=2),
    "YIELD_RECOVERY_SAMPLES": env.int("INFERENCE_YIELD_RECOVERY_SAMPLES", default=3),
    # Probes of a model measured useless run in the background (never shown, never waited
    # for), so they cost model time only: one every interval (plus a fraction of answers).
    "YIELD_PROBE_FRACTION": env.float("INFERENCE_YIELD_PROBE_FRACTION", default=0.0),
    "YIELD_PROBE_INTERVAL_S": env.float("INFERENCE_YIELD_PROBE_INTERVAL_S", default=30.0),
    "YIELD_PROBES_IN_FLIGHT": env.int("INFERENCE_YIELD_PROBES_IN_FLIGHT", default=1),
    "YIELD_MAX_AGE_S": env.float("INFERENCE_YIELD_MAX_AGE_S", default=3600.0),
    "YIELD_FLUSH_INTERVAL_S": env.float("INFERENCE_YIELD_FLUSH_INTERVAL_S", default=2.0),
}

# --------------------------------------------------------------------------- actions
# Fernet key for tenants' provider credentials: its own variable, else HKDF of the secret key.
ACTIONS_ENCRYPTION_KEY = env.str("ACTIONS_ENCRYPTION_KEY", default="") or keys.derive_fernet_key(
    SECRET_KEY, "actions-credentials"
)
# Envelope encryption at rest (supportbot/encryption.py): per-tenant AES-256-GCM data keys
# wrapped by a master key. `ENCRYPTION_MASTER_KEYS` is a keyring `id=base64,id=base64`: the
# first entry wraps new keys, the others still unwrap (the rotation overlap, see
# `manage.py rotate_keys`). Development generates one random key into var/master-keys.
_master_keys = env.list("ENCRYPTION_MASTER_KEYS", default=[])
if not _master_keys:
    if not DEV_HTTP:
        raise ImproperlyConfigured(
            "ENCRYPTION_MASTER_KEYS is not set. Production needs at least one master key, e.g. "
            '`python -c \'import base64,os; print("k1=" + '
            "base64.urlsafe_b64encode(os.urandom(32)).decode())'`."
        )
    _master_keys = [keys.dev_master_keyring(VAR_DIR)]
try:
    ENCRYPTION_MASTER_KEYS = keys.parse_master_keyring(_master_keys)
except ValueError as exc:
    raise ImproperlyConfigured(f"ENCRYPTION_MASTER_KEYS: {exc}") from exc
# How long a process keeps using a tenant's active data key before it looks for a newer one.
ENCRYPTION_ACTIVE_KEY_TTL_S = env.float("ENCRYPTION_ACTIVE_KEY_TTL_S", default=60.0)
ACTIONS = {
    # Default provider timeout (a tenant's ProviderConfig.timeout_seconds overrides it).
    "PROVIDER_TIMEOUT_S": env.float("ACTIONS_PROVIDER_TIMEOUT_S", default=5.0),
    "PROVIDER_CONNECT_TIMEOUT_S": env.float("ACTIONS_PROVIDER_CONNECT_TIMEOUT_S", default=2.0),
    # An `executing` row older than this is presumed abandoned and resolved by lookup.
    "STALE_EXECUTING_S": env.float("ACTIONS_STALE_EXECUTING_S", default=60.0),
    # An `approved` row that nobody started after this long is executed by the sweeper.
    "STALE_APPROVED_S": env.float("ACTIONS_STALE_APPROVED_S", default=30.0),
    "MAX_ATTEMPTS": env.int("ACTIONS_MAX_ATTEMPTS", default=5),
}
# The shop currency amounts in chat are read in (another currency is asked back).
ACTIONS_CURRENCY = env.str("ACTIONS_CURRENCY", default="USD")
# The demo tenant's order system (demo/orders); seed_demo points `acme` at it.
ORDER_SERVICE_URL = env.str("ORDER_SERVICE_URL", default="")
