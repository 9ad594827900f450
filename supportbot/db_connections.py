"""Giving a thread's database connections back (to the pool, or closed)."""

from __future__ import annotations

from django.db import connections


def connections_release() -> None:
    """Close this thread's database connections, except one inside a transaction (the caller's
    atomic block, a test's transaction, owns that one).

    With the psycopg pool, closing returns the connection to the pool; a thread that ends while
    still holding one would keep it until the pool reclaims it.
    """
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()
