"""SQLite storage of the reference order service: orders, refunds (unique idempotency key),
a log of received requests (tests count provider calls with it) and the fault settings.

One connection guarded by a lock: the service is a single process and every write is short.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    items TEXT NOT NULL,
    status TEXT NOT NULL,
    amount_cents INTEGER NOT NULL,
    currency TEXT NOT NULL,
    placed_at TEXT NOT NULL,
    delivered_at TEXT
);
CREATE TABLE IF NOT EXISTS refunds (
    id TEXT PRIMARY KEY,
    idempotency_key TEXT NOT NULL UNIQUE,
    body_hash TEXT NOT NULL,
    order_id TEXT NOT NULL REFERENCES orders(id),
    amount_cents INTEGER NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    status_code INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS request_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    idempotency_key TEXT,
    status_code INTEGER,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT NOT NULL
);
"""

# (id, owner, items, status, amount, days since placed, days since delivery or None)
DEMO_ORDERS = [
    ("A-1042", "cust-1001", [("Trail Runner 2 shoes", 1, "89.99")], "delivered", "89.99", 12, 5),
    ("A-1043", "cust-1001", [("Ridge 3 tent", 1, "249.00")], "delivered", "249.00", 14, 8),
    ("A-1044", "cust-1001", [("Merino socks", 2, "14.50")], "delivered", "29.00", 70, 60),
    ("A-1045", "cust-1001", [("Summit 40L backpack", 1, "129.00")], "shipped", "129.00", 2, None),
    ("A-2001", "cust-1002", [("Trekking poles", 1, "45.00")], "delivered", "45.00", 9, 3),
    ("A-2002", "cust-1002", [("Down jacket", 1, "199.00")], "delivered", "199.00", 50, 45),
    ("A-2003", "cust-1002", [("Headlamp", 1, "34.95")], "processing", "34.95", 1, None),
]


def cents(amount: Decimal | str) -> int:
    return int((Decimal(str(amount)) * 100).to_integral_value())


def money(amount_cents: int) -> str:
    return f"{Decimal(amount_cents) / 100:.2f}"


def _iso(dt: datetime) -> str:
    return dt.replace(microsecond=0).isoformat().replace("+00:00", "Z")


class Store:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)

    # ------------------------------------------------------------------ seed / admin

    def seed(self, *, replace: bool = False) -> int:
        """Insert the demo orders with dates relative to now; return how many were written."""
        now = datetime.now(UTC)
        written = 0
        with self.lock:
            for oid, owner, items, status, amount, placed, delivered in DEMO_ORDERS:
                verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
                cur = self.db.execute(
                    f"{verb} INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                    (
                        oid,
                        owner,
                        json.dumps(
                            [{"name": n, "quantity": q, "unit_price": p} for n, q, p in items]
                        ),
                        status,
                        cents(amount),
                        "USD",
                        _iso(now - timedelta(days=placed)),
                        _iso(now - timedelta(days=delivered)) if delivered is not None else None,
                    ),
                )
                written += cur.rowcount
        return written

    def reset(self) -> None:
        """Forget refunds, logged requests and faults; re-seed the orders (tests only)."""
        with self.lock:
            self.db.execute("DELETE FROM refunds")
            self.db.execute("DELETE FROM request_log")
            self.db.execute("DELETE FROM faults")
        self.seed(replace=True)

    def log_request(self, *, method: str, path: str, key: str | None) -> int:
        """Log a request on arrival (so a client that timed out still counts); return its id."""
        with self.lock:
            cur = self.db.execute(
                "INSERT INTO request_log (method, path, idempotency_key, at) VALUES (?, ?, ?, ?)",
                (method, path, key, _iso(datetime.now(UTC))),
            )
            return cur.lastrowid

    def log_status(self, request_id: int, status: int) -> None:
        with self.lock:
            self.db.execute(
                "UPDATE request_log SET status_code = ? WHERE id = ?", (status, request_id)
            )

    def requests(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM request_log ORDER BY id").fetchall()
        return [dict(r) for r in rows]

    def faults(self) -> dict[str, Any]:
        row = self.db.execute("SELECT data FROM faults WHERE id = 1").fetchone()
        return json.loads(row["data"]) if row else {}

    def set_faults(self, data: dict[str, Any]) -> None:
        with self.lock:
            self.db.execute(
                "INSERT OR REPLACE INTO faults (id, data) VALUES (1, ?)", (json.dumps(data),)
            )

    def take_fault(self, name: str) -> bool:
        """Consume one count of a counted fault (e.g. `fail_count`); True if one was left."""
        with self.lock:
            data = self.faults()
            left = int(data.get(name, 0))
            if left <= 0:
                return False
            data[name] = left - 1
            self.db.execute("UPDATE faults SET data = ? WHERE id = 1", (json.dumps(data),))
            return True

    # ------------------------------------------------------------------ orders

    def order(self, order_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM orders WHERE id = ?", (order_id,)).fetchone()
        if row is None:
            return None
        refunded = self.db.execute(
            "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE order_id = ?", (order_id,)
        ).fetchone()[0]
        return {
            "id": row["id"],
            "owner": row["owner"],
            "items": json.loads(row["items"]),
            "status": row["status"],
            "amount": money(row["amount_cents"]),
            "refunded_amount": money(refunded),
            "currency": row["currency"],
            "placed_at": row["placed_at"],
            "delivered_at": row["delivered_at"],
        }

    # ------------------------------------------------------------------ refunds

    @staticmethod
    def body_hash(order_id: str, amount_cents: int, reason: str) -> str:
        raw = json.dumps([order_id, amount_cents, reason])
        return hashlib.sha256(raw.encode()).hexdigest()

    def refund_by_key(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM refunds WHERE idempotency_key = ?", (key,)).fetchone()
        return self._refund(row) if row else None

    def refund_create(
        self, *, key: str, order_id: str, amount_cents: int, reason: str
    ) -> tuple[int, dict[str, Any]]:
        """Commit a refund once per key; return (status code, body). Replays return the first."""
        digest = self.body_hash(order_id, amount_cents, reason)
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                row = self.db.execute(
                    "SELECT * FROM refunds WHERE idempotency_key = ?", (key,)
                ).fetchone()
                if row is not None:
                    self.db.execute("COMMIT")
                    if row["body_hash"] != digest:
                        return 422, {
                            "error": "idempotency_key_reused",
                            "detail": "This Idempotency-Key was used with a different body.",
                        }
                    return row["status_code"], {**self._refund(row), "replayed": True}
                order = self.db.execute(
                    "SELECT amount_cents FROM orders WHERE id = ?", (order_id,)
                ).fetchone()
                if order is None:
                    self.db.execute("COMMIT")
                    return 404, {"error": "order_not_found", "detail": "No such order."}
                refunded = self.db.execute(
                    "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE order_id = ?",
                    (order_id,),
                ).fetchone()[0]
                if amount_cents <= 0 or refunded + amount_cents > order["amount_cents"]:
                    self.db.execute("COMMIT")
                    return 422, {
                        "error": "amount_invalid",
                        "detail": "Amount must be positive and at most the unrefunded total.",
                    }
                refund_id = "rf_" + secrets.token_hex(8)
                self.db.execute(
                    "INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        refund_id,
                        key,
                        digest,
                        order_id,
                        amount_cents,
                        reason,
                        "succeeded",
                        201,
                        _iso(datetime.now(UTC)),
                    ),
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return 201, self.refund_by_key(key) or {}

    def refunds(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM refunds ORDER BY created_at, id").fetchall()
        return [self._refund(r) for r in rows]

    @staticmethod
    def _refund(row: sqlite3.Row) -> dict[str, Any]:
        return {
            "id": row["id"],
            "idempotency_key": row["idempotency_key"],
            "order_id": row["order_id"],
            "amount": money(row["amount_cents"]),
            "currency": "USD",
            "reason": row["reason"],
            "status": row["status"],
            "created_at": row["created_at"],
        }
