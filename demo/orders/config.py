"""Where the order service listens, stores and which bearer token it accepts (env-driven).

Plain Python (no Django): the service is its own deployment. Supportbot's demo seed reads the
same values to point the demo tenant's provider config at it.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PORT = 8090  # 8100+ belongs to the inference worker pool (INFERENCE_BASE_PORT)


def var_dir() -> Path:
    root = Path(__file__).resolve().parent.parent.parent
    return Path(os.environ.get("SUPPORTBOT_VAR_DIR", root / "var")).resolve()


@dataclass(frozen=True)
class ServiceConfig:
    host: str
    port: int
    db_path: Path
    token: str

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def service_token() -> str:
    """The bearer token: `ORDER_SERVICE_TOKEN`, else one generated once into var/orders/token."""
    token = os.environ.get("ORDER_SERVICE_TOKEN", "")
    if token:
        return token
    path = var_dir() / "orders" / "token"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    path.write_text(token)
    path.chmod(0o600)
    return token


def load() -> ServiceConfig:
    db = os.environ.get("ORDER_SERVICE_DB", "") or str(var_dir() / "orders" / "orders.sqlite3")
    return ServiceConfig(
        host=os.environ.get("ORDER_SERVICE_HOST", "127.0.0.1"),
        port=int(os.environ.get("ORDER_SERVICE_PORT", DEFAULT_PORT)),
        db_path=Path(db),
        token=service_token(),
    )
