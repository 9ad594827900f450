"""Background tasks go out through one broker per process, over the real Redis."""

import contextlib
import os

import pytest
import redis
from django_q.conf import Conf

from supportbot import queue


@pytest.fixture
def fresh_broker(monkeypatch):
    monkeypatch.setattr(queue, "_broker", None)
    yield
    with contextlib.suppress(redis.RedisError):  # a test's own Valkey may be gone already
        queue.shared_broker().delete_queue()


@pytest.fixture
def connects(monkeypatch):
    """How many sockets redis-py opened to Redis (TCP or, in development, a unix socket)."""
    opened = []
    for cls in (redis.connection.Connection, redis.connection.UnixDomainSocketConnection):
        real = cls._connect

        def counted(self, real=real):
            opened.append(self)
            return real(self)

        monkeypatch.setattr(cls, "_connect", counted)
    return opened


def test_tasks_enqueued_one_after_another_share_one_connection(fresh_broker, connects):
    before = queue.shared_broker().queue_size()
    for n in range(20):
        queue.task_enqueue("math.floor", n + 0.5)
    assert queue.shared_broker().queue_size() == before + 20
    assert len(connects) <= 1  # django-q2 alone opened a connection per task: 20


def test_a_task_goes_to_the_queue_of_the_cluster_name_in_force(fresh_broker, monkeypatch):
    queue.shared_broker()  # made for the name in force before
    monkeypatch.setattr(Conf, "CLUSTER_NAME", "sbtest-renamed")
    queue.task_enqueue("math.floor", 2.5)
    assert queue.shared_broker().list_key == "django_q:sbtest-renamed:q"
    assert queue.shared_broker().queue_size() == 1  # a worker on that queue will see it


@pytest.mark.process
def test_a_forked_child_makes_a_broker_of_its_own(fresh_broker):
    parents = queue.shared_broker()
    pid = os.fork()
    if pid == 0:  # the child: never share the parent's sockets
        os._exit(0 if queue.shared_broker() is not parents else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert queue.shared_broker() is parents  # the parent keeps its own


def test_the_shared_broker_reconnects_after_redis_restarts(
    fresh_broker, private_valkey, monkeypatch
):
    monkeypatch.setattr(Conf, "REDIS", private_valkey.url)
    queue.task_enqueue("math.floor", 1.5)
    private_valkey.kill()
    with pytest.raises(redis.ConnectionError):
        queue.task_enqueue("math.floor", 2.5)
    private_valkey.start()
    queue.task_enqueue("math.floor", 3.5)  # the same broker, a new connection
    assert queue.shared_broker().queue_size() >= 1
