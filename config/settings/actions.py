"""Actions (order-system tools) and envelope encryption at rest."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env
from config.settings.base import PRODUCTION, SECRET_KEY, VAR_DIR
from supportbot import keys

# --------------------------------------------------------------------------- actions
# Fernet key for tenants' provider credentials: its own variable, else HKDF of the secret key.
ACTIONS_ENCRYPTION_KEY = env.str("ACTIONS_ENCRYPTION_KEY", default="") or (
    keys.derive_fernet_key(SECRET_KEY, "actions-credentials") if SECRET_KEY else ""
)
# Envelope encryption at rest (supportbot/encryption.py): per-tenant AES-256-GCM data keys
# wrapped by a master key. `ENCRYPTION_MASTER_KEYS` is a keyring `id=base64,id=base64`: the
# first entry wraps new keys, the others still unwrap (the rotation overlap, see
# `manage.py rotate_keys`). Development reads the random key `manage.py services start` wrote
# into var/master-keys (none until then: encryption then refuses to seal or open).
_master_keys = env.list("ENCRYPTION_MASTER_KEYS", default=[])
if not _master_keys:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "ENCRYPTION_MASTER_KEYS is not set. Production needs at least one master key, e.g. "
            '`python -c \'import base64,os; print("k1=" + '
            "base64.urlsafe_b64encode(os.urandom(32)).decode())'`."
        )
    _master_keys = keys.dev_master_keyring_read(VAR_DIR)
try:
    ENCRYPTION_MASTER_KEYS = keys.parse_master_keyring(_master_keys) if _master_keys else {}
except ValueError as exc:
    raise ImproperlyConfigured(f"ENCRYPTION_MASTER_KEYS: {exc}") from exc
# Blind indexes (keyed hashes that equality lookups use instead of encrypted values: order
# ids of refunds in flight, erased customers' ids, answer-cache keys) have their own keyring,
# `id=base64,id=base64` (32 bytes each), newest first: new rows use the first, lookups try
# all, and `manage.py blind_index_rekey` moves stored ones to the first before an old key is
# dropped. Never derived from DJANGO_SECRET_KEY, so rotating that changes no index.
# Development reads the random key `manage.py services start` wrote into var/blind-index-keys.
_blind_index_keys = env.list("BLIND_INDEX_KEYS", default=[])
if not _blind_index_keys:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "BLIND_INDEX_KEYS is not set. Production needs at least one blind-index key, e.g. "
            '`python -c \'import base64,os; print("b1=" + '
            "base64.urlsafe_b64encode(os.urandom(32)).decode())'`."
        )
    _blind_index_keys = keys.dev_blind_index_keyring_read(VAR_DIR)
try:
    BLIND_INDEX_KEYS = (
        keys.parse_keyring(_blind_index_keys, what="blind-index key") if _blind_index_keys else {}
    )
except ValueError as exc:
    raise ImproperlyConfigured(f"BLIND_INDEX_KEYS: {exc}") from exc
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
