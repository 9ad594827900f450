"""Partner and console API (DRF, OpenAPI) and the abuse limits."""

from config.env import env

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
    # Failed logins per (user name, client address) and per address, past which a lock that
    # doubles per failure; per user name over all addresses, a slower limit that locks the
    # name for the rest of its window (supportbot/login_throttle.py).
    "login_user": env.str("RATE_LIMIT_LOGIN_USER", default="5/900"),
    "login_user_global": env.str("RATE_LIMIT_LOGIN_USER_GLOBAL", default="50/3600"),
    "login_ip": env.str("RATE_LIMIT_LOGIN_IP", default="20/900"),
}
LOGIN_LOCKOUT_BASE_S = env.int("LOGIN_LOCKOUT_BASE_S", default=30)
LOGIN_LOCKOUT_MAX_S = env.int("LOGIN_LOCKOUT_MAX_S", default=3600)
# Failed logins shown to their account's owner on the console home page are kept this long.
LOGIN_FAILURE_RETENTION_DAYS = env.int("LOGIN_FAILURE_RETENTION_DAYS", default=30)
