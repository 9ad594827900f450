"""A forked child (a q2 worker) never talks to PostgreSQL over its parent's connection."""

import os

import pytest
from django.db import connection


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _in_child(work) -> str:
    """Run `work` in a forked child; return what it printed (or its error)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running any of the parent's cleanup
        try:
            os.write(write, str(work()).encode())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write, f"error: {exc!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    os.waitpid(pid, 0)
    return out


@pytest.mark.django_db(transaction=True)
def test_a_forked_child_opens_its_own_connection_never_the_parents_pooled_one():
    assert connection.settings_dict["OPTIONS"].get("pool"), "tests run with the pool, as prod"
    parent = _backend_pid()
    connection.close()  # back into the pool, as django-q2 does right before it forks
    children = {_in_child(_backend_pid) for _ in range(3)}
    assert all(c.isdigit() for c in children), children
    assert parent not in {int(c) for c in children}
    with connection.cursor() as cursor:  # the parent's pooled sessions still work
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [parent])
        assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_a_child_forked_while_the_parent_holds_a_connection_gets_its_own():
    parent = _backend_pid()  # held, not closed: a fork from inside a request
    child = _in_child(_backend_pid)
    assert child.isdigit(), child
    assert int(child) != parent
    assert _backend_pid() == parent
