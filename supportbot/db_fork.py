"""Database connections never cross a fork.

A forked child (django-q2 forks its workers and monitor from the cluster's parent, and forks
them again whenever one dies or is recycled) inherits the parent's psycopg pool with its idle
connections, and the Django connection the forking thread held. Used from both processes, one
server session then carries two conversations at once: "rolling back returned connection …
INTRANS", "can't change 'autocommit' now", results of the other process's query. django-q2
closes Django's connections before forking, which with a pool only returns them to it.

After a fork the child forgets them: Django opens a new pool (and new connections) on first use.
The abandoned objects are kept referenced so nothing in the child ever finalizes them (psycopg
itself never terminates a connection from a process that did not open it).
"""

from __future__ import annotations

import os

_abandoned: list[object] = []


def connections_forget_after_fork() -> None:
    """Drop the inherited pools and this thread's connections without touching their sockets."""
    from django.db import connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    pools = DatabaseWrapper._connection_pools
    _abandoned.extend(pools.values())
    pools.clear()
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            _abandoned.append(conn.connection)
            conn.connection = None
        # Whatever the parent was doing on it is not this process's transaction.
        conn.in_atomic_block = False
        conn.savepoint_ids = []
        conn.atomic_blocks = []
        conn.needs_rollback = False
        conn.closed_in_transaction = False
        conn.run_on_commit = []
        conn.run_commit_hooks_on_set_autocommit_on = False


def install() -> None:
    """Register the after-fork hook (once per process; AppConfig.ready calls it)."""
    global _installed
    if not _installed:
        os.register_at_fork(after_in_child=connections_forget_after_fork)
        _installed = True


_installed = False
