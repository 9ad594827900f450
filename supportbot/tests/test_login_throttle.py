"""Login throttling per (user name, address), per user name and per address with backoff, on
every login page; failed logins shown to their user."""

import threading
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from supportbot import ratelimit
from supportbot.models import LoginFailure
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


def test_a_stranger_locks_only_his_own_address_not_the_user(user, strict_limits):
    strict_limits(login_user="3/900")
    stranger = Client(REMOTE_ADDR="203.0.113.66")
    codes = [
        stranger.post("/console/login/", {"username": user.username, "password": f"x{n}"})
        for n in range(5)
    ]
    assert [r.status_code for r in codes] == [200, 200, 200, 200, 429]
    # The real user, from their own address, logs in at once.
    owner = Client(REMOTE_ADDR="198.51.100.20")
    ok = owner.post(
        "/console/login/", {"username": user.username, "password": "right-password-123"}
    )
    assert ok.status_code == 302
    # The stranger stays locked, the right password unseen.
    again = stranger.post(
        "/console/login/", {"username": user.username, "password": "right-password-123"}
    )
    assert again.status_code == 429


def test_guessing_spread_over_many_addresses_hits_the_slower_per_user_limit(
    user, strict_limits, monkeypatch
):
    strict_limits(login_user="3/900", login_user_global="6/3600")
    # 10 s into an hour window: the sliding estimate stays over the limit for more than an
    # hour here, and the lock must still end within the window's length.
    start = (int(ratelimit.time.time() // 3600) + 1) * 3600 + 10.0
    monkeypatch.setattr(ratelimit.time, "time", lambda: start)
    for n in range(7):  # two failures from each of several addresses: none is locked alone
        Client(REMOTE_ADDR=f"203.0.113.{n // 2 + 1}").post(
            "/console/login/", {"username": user.username, "password": f"guess{n}"}
        )
    locked = Client(REMOTE_ADDR="198.51.100.20").post(
        "/console/login/", {"username": user.username, "password": "right-password-123"}
    )
    assert locked.status_code == 429
    assert 1 <= int(locked["Retry-After"]) <= 3600
    other = Client(REMOTE_ADDR="198.51.100.20").post(
        "/console/login/", {"username": "someone-else", "password": "x"}
    )
    assert other.status_code == 200  # the per-user limit locks that user only


def test_failed_logins_are_kept_truncated_and_shown_to_their_user_only(user, tenant, strict_limits):
    bystander = MembershipFactory(tenant=tenant, role="agent").user
    Client(REMOTE_ADDR="203.0.113.77").post(
        "/console/login/", {"username": user.username, "password": "wrong"}
    )
    Client(REMOTE_ADDR="2001:db8:1:2::9").post(
        "/console/login/", {"username": user.username, "password": "wrong"}
    )
    Client().post("/console/login/", {"username": "nobody-has-this", "password": "x"})
    assert sorted(LoginFailure.objects.filter(user=user).values_list("network", flat=True)) == [
        "2001:db8:1::/48",
        "203.0.113.0/24",
    ]
    assert LoginFailure.objects.count() == 2  # unknown names leave no row
    client = Client()
    client.force_login(user)
    home = client.get("/console/").content.decode()
    assert "Failed sign-ins to your account" in home
    assert "203.0.113.0/24" in home
    assert "2001:db8:1::/48" in home
    assert "203.0.113.77" not in home
    client.force_login(bystander)
    assert "Failed sign-ins" not in client.get("/console/").content.decode()


def test_failures_older_than_the_retention_are_forgotten(user, strict_limits, settings):
    settings.LOGIN_FAILURE_RETENTION_DAYS = 30
    old = LoginFailure.objects.create(user=user, network="192.0.2.0/24")
    LoginFailure.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    Client().post("/console/login/", {"username": user.username, "password": "wrong"})
    assert list(LoginFailure.objects.filter(user=user).values_list("network", flat=True)) == [
        "127.0.0.0/24"
    ]
