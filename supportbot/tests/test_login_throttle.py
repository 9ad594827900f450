"""Login throttling per user name and IP with backoff, on every login page."""

import threading

import pytest
from django.test import Client

from supportbot import ratelimit
from supportbot.tests.factories import MembershipFactory

# /console/actions/login/ only redirects to /console/login/ (console/tests/test_urls.py).
LOGIN_PAGES = ["/console/login/", "/admin/login/"]


@pytest.fixture
def user(tenant):
    user = MembershipFactory(tenant=tenant, role="admin").user
    user.set_password("right-password-123")
    user.is_staff = True
    user.save()
    return user


@pytest.mark.parametrize("page", LOGIN_PAGES)
def test_failed_logins_lock_the_name_with_429_and_retry_after(page, user, strict_limits):
    strict_limits(login_user="3/900")
    client = Client()
    codes = [
        client.post(page, {"username": user.username, "password": f"wrong{n}"}).status_code
        for n in range(3)
    ]
    assert codes == [200, 200, 200]
    # The 4th failure locks; while locked even the right password is refused unseen.
    assert client.post(page, {"username": user.username, "password": "x"}).status_code == 200
    locked = client.post(page, {"username": user.username, "password": "right-password-123"})
    assert locked.status_code == 429
    assert 1 <= int(locked["Retry-After"]) <= 30


def test_lock_doubles_with_each_further_failure(user, strict_limits, settings):
    strict_limits(login_user="1/900")
    settings.LOGIN_LOCKOUT_BASE_S = 10
    key = (user.username.lower(), "127.0.0.1")
    client = Client()
    client.post("/console/login/", {"username": user.username, "password": "a"})
    client.post("/console/login/", {"username": user.username, "password": "b"})  # 2nd: lock
    assert 5 < ratelimit.lockout_remaining(name="login_user", key=key) <= 10
    ratelimit.lockout_clear(name="login_user", key=key)
    client.post("/console/login/", {"username": user.username, "password": "c"})
    assert 10 < ratelimit.lockout_remaining(name="login_user", key=key) <= 20


def test_odd_user_names_are_counted_not_crashing(db, strict_limits):
    strict_limits(login_user="1/900")
    client = Client()
    name = "\u00a0" + "\U0001f600" * 200
    assert client.post("/console/login/", {"username": name, "password": "x"}).status_code == 200
    assert client.post("/console/login/", {"username": name, "password": "x"}).status_code == 200
    assert client.post("/console/login/", {"username": name, "password": "x"}).status_code == 429


def test_many_names_from_one_ip_lock_the_ip(db, strict_limits):
    strict_limits(login_ip="5/900")
    client = Client(REMOTE_ADDR="203.0.113.9")
    codes = [
        client.post("/console/login/", {"username": f"u{n}", "password": "x"}).status_code
        for n in range(8)
    ]
    assert codes == [200] * 6 + [429, 429]
    other = Client(REMOTE_ADDR="198.51.100.2")
    assert other.post("/console/login/", {"username": "u0", "password": "x"}).status_code == 200


def test_a_successful_login_clears_the_name_and_redirects(user, strict_limits):
    strict_limits(login_user="3/900")
    client = Client()
    client.post("/console/login/", {"username": user.username, "password": "wrong"})
    ok = client.post(
        "/console/login/", {"username": user.username, "password": "right-password-123"}
    )
    assert ok.status_code == 302


@pytest.mark.django_db(transaction=True)
def test_parallel_guessing_gets_no_more_tries_than_the_limit(user, strict_limits):
    strict_limits(login_user="4/900")
    results: list[int] = []
    lock = threading.Lock()

    def guess(n: int) -> None:
        response = Client().post(
            "/console/login/", {"username": user.username, "password": f"guess{n}"}
        )
        with lock:
            results.append(response.status_code)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = Client().post("/console/login/", {"username": user.username, "password": "z"})
    assert after.status_code == 429


def test_with_redis_down_logins_still_lock(user, strict_limits, settings):
    strict_limits(login_user="2/900")
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    ratelimit._redis.down_until = 0.0
    client = Client()
    for n in range(2):
        client.post("/console/login/", {"username": user.username, "password": f"w{n}"})
    # Fallback allows 2 // 2 = 1 failure, so the name is locked by now.
    locked = client.post("/console/login/", {"username": user.username, "password": "w"})
    assert locked.status_code == 429
