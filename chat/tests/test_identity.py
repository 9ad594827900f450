import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.utils import timezone

from chat.identity import (
    IdentityError,
    VerifiedIdentity,
    identity_session_make,
    identity_session_verify,
    identity_token_make,
    identity_token_redeem,
    identity_token_verify,
    visitor_token_make,
    visitor_token_verify,
)
from supportbot import ratelimit
from supportbot.services import Actor, tenant_widget_secret_rotate


def test_identity_token_made_with_the_widget_secret_verifies(tenant):
    token = identity_token_make(tenant=tenant, external_id="cust.42|x")
    assert identity_token_verify(tenant=tenant, token=token).external_id == "cust.42|x"


def test_identity_token_of_another_tenant_is_rejected(tenant, other_tenant):
    token = identity_token_make(tenant=other_tenant, external_id="cust-42")
    with pytest.raises(IdentityError, match="signature"):
        identity_token_verify(tenant=tenant, token=token)


def test_identity_token_with_swapped_customer_id_is_rejected(tenant):
    token = identity_token_make(tenant=tenant, external_id="alice")
    parts = token.split(".")
    forged = identity_token_make(tenant=tenant, external_id="mallory").split(".")[1]
    with pytest.raises(IdentityError, match="signature"):
        identity_token_verify(tenant=tenant, token=".".join([parts[0], forged, *parts[2:]]))


def test_expired_identity_token_is_rejected(tenant):
    token = identity_token_make(tenant=tenant, external_id="alice", ttl_seconds=-5)
    with pytest.raises(IdentityError, match="expired"):
        identity_token_verify(tenant=tenant, token=token)


@pytest.mark.parametrize("token", ["", "v1.abc", "v2.YQ.1.00", "v1.YQ.notanumber.00", None])
def test_malformed_identity_token_is_rejected(tenant, token):
    with pytest.raises(IdentityError):
        identity_token_verify(tenant=tenant, token=token)


def test_visitor_token_round_trips_and_is_bound_to_the_tenant(tenant, other_tenant):
    visitor_id, token = visitor_token_make(tenant=tenant)
    assert visitor_token_verify(tenant=tenant, token=token) == visitor_id
    with pytest.raises(IdentityError, match="another site"):
        visitor_token_verify(tenant=other_tenant, token=token)
    with pytest.raises(IdentityError):
        visitor_token_verify(tenant=tenant, token=token[:-2] + "xx")


def test_identity_token_expiry_is_in_the_future(tenant):
    token = identity_token_make(tenant=tenant, external_id="a", ttl_seconds=60)
    assert identity_token_verify(tenant=tenant, token=token).expires_at > time.time()


def test_a_ten_year_token_is_rejected(tenant):
    token = identity_token_make(tenant=tenant, external_id="a", ttl_seconds=10 * 365 * 86400)
    with pytest.raises(IdentityError, match="lives too long"):
        identity_token_verify(tenant=tenant, token=token)


def test_the_tenant_sets_a_shorter_maximum_lifetime(tenant):
    tenant.identity_token_max_lifetime_s = 600
    tenant.save()
    identity_token_verify(
        tenant=tenant, token=identity_token_make(tenant=tenant, external_id="a", ttl_seconds=600)
    )
    with pytest.raises(IdentityError, match="lives too long"):
        identity_token_verify(
            tenant=tenant,
            token=identity_token_make(tenant=tenant, external_id="a", ttl_seconds=3600),
        )


def test_a_token_is_redeemed_once_only(tenant):
    token = identity_token_make(tenant=tenant, external_id="alice")
    assert identity_token_redeem(tenant=tenant, token=token).external_id == "alice"
    with pytest.raises(IdentityError) as caught:
        identity_token_redeem(tenant=tenant, token=token)
    assert (caught.value.code, caught.value.field, caught.value.detail) == (
        "identity_replayed",
        "identity",
        "Identity token was already used; get a fresh one from your site.",
    )
    # A fresh token for the same customer (another nonce) is fine.
    identity_token_redeem(
        tenant=tenant, token=identity_token_make(tenant=tenant, external_id="alice")
    )


def test_replay_is_refused_by_another_process_through_redis(tenant):
    token = identity_token_make(tenant=tenant, external_id="bob")
    identity_token_redeem(tenant=tenant, token=token)
    ratelimit._local.clear()  # another process: no local memory of it
    with pytest.raises(IdentityError):
        identity_token_redeem(tenant=tenant, token=token)


def test_replay_is_refused_with_redis_down(tenant, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    ratelimit._redis.down_until = 0.0
    token = identity_token_make(tenant=tenant, external_id="carol")
    identity_token_redeem(tenant=tenant, token=token)
    with pytest.raises(IdentityError):
        identity_token_redeem(tenant=tenant, token=token)


@pytest.mark.django_db(transaction=True)
def test_parallel_redemptions_of_one_token_have_one_winner(tenant):
    token = identity_token_make(tenant=tenant, external_id="dave")
    outcomes: list[str] = []

    def redeem() -> None:
        try:
            identity_token_redeem(tenant=tenant, token=token)
            outcomes.append("ok")
        except IdentityError:
            outcomes.append("refused")

    with ThreadPoolExecutor(8) as pool:
        for _ in range(8):
            pool.submit(redeem)
    assert sorted(outcomes) == ["ok"] + ["refused"] * 7


def test_v1_tokens_without_a_nonce_still_verify(tenant):
    token = identity_token_make(tenant=tenant, external_id="e", nonce="")
    assert token.startswith("v1.")
    assert identity_token_verify(tenant=tenant, token=token).external_id == "e"


@pytest.mark.parametrize("token", [123, ["v1"], {"a": 1}, "v2.YQ.1.n.00.extra", "v1.\udcff.1.0"])
def test_odd_token_values_are_identity_errors(tenant, token):
    with pytest.raises(IdentityError):
        identity_token_verify(tenant=tenant, token=token)


def test_rotated_secret_keeps_the_old_one_until_the_overlap_ends(tenant):
    old_token = identity_token_make(tenant=tenant, external_id="f")
    tenant_widget_secret_rotate(tenant=tenant, actor=Actor.system(), overlap_seconds=3600)
    tenant.refresh_from_db()
    assert identity_token_verify(tenant=tenant, token=old_token).external_id == "f"
    new_token = identity_token_make(tenant=tenant, external_id="f")
    assert identity_token_verify(tenant=tenant, token=new_token).external_id == "f"
    tenant.widget_secret_previous_until = timezone.now() - timedelta(seconds=1)
    tenant.save()
    with pytest.raises(IdentityError, match="signature"):
        identity_token_verify(tenant=tenant, token=old_token)


def test_rotation_without_overlap_refuses_old_tokens_at_once(tenant):
    old_token = identity_token_make(tenant=tenant, external_id="g")
    tenant_widget_secret_rotate(tenant=tenant, actor=Actor.system(), overlap_seconds=0)
    tenant.refresh_from_db()
    with pytest.raises(IdentityError):
        identity_token_verify(tenant=tenant, token=old_token)


def test_identity_session_is_bound_to_tenant_and_expiry(tenant, other_tenant):
    token = identity_token_make(tenant=tenant, external_id="h", ttl_seconds=60)
    identity = identity_token_verify(tenant=tenant, token=token)
    session = identity_session_make(tenant=tenant, identity=identity)
    assert identity_session_verify(tenant=tenant, token=session) == identity
    with pytest.raises(IdentityError):
        identity_session_verify(tenant=other_tenant, token=session)
    expired = identity_session_make(
        tenant=tenant,
        identity=VerifiedIdentity(
            external_id="h", expires_at=int(time.time()) - 1, secret_id=identity.secret_id
        ),
    )
    with pytest.raises(IdentityError) as caught:
        identity_session_verify(tenant=tenant, token=expired)
    assert caught.value.code == "identity_expired"


def _session_for(tenant, external_id="r"):
    identity = identity_token_verify(
        tenant=tenant, token=identity_token_make(tenant=tenant, external_id=external_id)
    )
    return identity_session_make(tenant=tenant, identity=identity)


def test_identity_session_ends_when_its_widget_secret_is_rotated_out(tenant):
    session = _session_for(tenant)
    tenant_widget_secret_rotate(tenant=tenant, actor=Actor.system(), overlap_seconds=0)
    tenant.refresh_from_db()
    with pytest.raises(IdentityError) as caught:
        identity_session_verify(tenant=tenant, token=session)
    assert caught.value.code == "identity_expired"
    assert identity_session_verify(tenant=tenant, token=_session_for(tenant)).external_id == "r"


def test_identity_session_lasts_through_the_rotation_overlap_and_not_after(tenant):
    session = _session_for(tenant)
    tenant_widget_secret_rotate(tenant=tenant, actor=Actor.system(), overlap_seconds=3600)
    tenant.refresh_from_db()
    assert identity_session_verify(tenant=tenant, token=session).external_id == "r"
    tenant.widget_secret_previous_until = timezone.now() - timedelta(seconds=1)
    tenant.save()
    with pytest.raises(IdentityError):
        identity_session_verify(tenant=tenant, token=session)


def test_identity_session_naming_no_secret_is_refused(tenant):
    from django.core import signing

    from chat.identity import IDENTITY_SESSION_SALT

    legacy = signing.dumps(
        {"t": tenant.pk, "x": "r", "e": int(time.time()) + 600}, salt=IDENTITY_SESSION_SALT
    )
    with pytest.raises(IdentityError):
        identity_session_verify(tenant=tenant, token=legacy)


def _failure(call) -> tuple[str, str | None, str]:
    with pytest.raises(IdentityError) as caught:
        call()
    return caught.value.code, caught.value.field, caught.value.detail


def test_each_refused_session_or_visitor_token_names_its_field_code_and_reason(
    tenant, other_tenant
):
    """What the socket's `error` event carries for each refusal (docs/chat-protocol.md): the
    page re-identifies on `identity_expired`, drops the token named by `field` otherwise."""
    session = _session_for(tenant)
    identity = identity_session_verify(tenant=tenant, token=session)
    expired = identity_session_make(
        tenant=tenant,
        identity=VerifiedIdentity(
            external_id="r", expires_at=int(time.time()) - 1, secret_id=identity.secret_id
        ),
    )
    _, visitor = visitor_token_make(tenant=tenant)

    def verify_session(token, on=tenant):
        return lambda: identity_session_verify(tenant=on, token=token)

    def verify_visitor(token, on=tenant):
        return lambda: visitor_token_verify(tenant=on, token=token)

    refusals = {
        "forged session": verify_session(session[:-2] + "xx"),
        "another site's session": verify_session(session, other_tenant),
        "expired session": verify_session(expired),
        "forged visitor token": verify_visitor(visitor[:-2] + "xx"),
        "another site's visitor token": verify_visitor(visitor, other_tenant),
    }
    found = {what: _failure(call) for what, call in refusals.items()}
    tenant_widget_secret_rotate(tenant=tenant, actor=Actor.system(), overlap_seconds=0)
    tenant.refresh_from_db()
    found["session of a rotated-out secret"] = _failure(verify_session(session))

    assert found == {
        "forged session": ("invalid_identity", "identity_session", "Invalid identity session."),
        "another site's session": (
            "invalid_identity",
            "identity_session",
            "Identity session belongs to another site.",
        ),
        "expired session": (
            "identity_expired",
            "identity_session",
            "Identity expired; sign in again.",
        ),
        "forged visitor token": ("invalid_identity", "visitor", "Invalid visitor token."),
        "another site's visitor token": (
            "invalid_identity",
            "visitor",
            "Visitor token belongs to another site.",
        ),
        "session of a rotated-out secret": (
            "identity_expired",
            "identity_session",
            "The site's widget secret changed; sign in again.",
        ),
    }


def test_a_visitor_token_older_than_ninety_days_is_refused(tenant, monkeypatch):
    """A visitor token is a bearer credential for an anonymous conversation: it ends."""
    from chat.identity import VISITOR_MAX_AGE

    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now - VISITOR_MAX_AGE - 60)
    _, old = visitor_token_make(tenant=tenant)
    monkeypatch.setattr(time, "time", lambda: now - VISITOR_MAX_AGE + 60)
    visitor_id, recent = visitor_token_make(tenant=tenant)
    monkeypatch.setattr(time, "time", lambda: now)

    assert visitor_token_verify(tenant=tenant, token=recent) == visitor_id
    assert _failure(lambda: visitor_token_verify(tenant=tenant, token=old)) == (
        "invalid_identity",
        "visitor",
        "Invalid visitor token.",
    )


def test_a_redeemed_token_stays_refused_for_the_rest_of_its_life(tenant):
    """The used-mark outlives the token: a replay in its last seconds is refused too."""
    token = identity_token_make(tenant=tenant, external_id="carol", ttl_seconds=5)
    identity_token_redeem(tenant=tenant, token=token)
    time.sleep(1.6)  # a mark kept for less than the token's life has expired by now
    with pytest.raises(IdentityError) as caught:
        identity_token_redeem(tenant=tenant, token=token)
    assert caught.value.code == "identity_replayed"


# "abW" encodes to "YWJX": an id whose encoding ends in a letter a padding strip could eat.
@pytest.mark.parametrize("external_id", ["a", "ab", "abc", "abW", "abcd", "abcde", "ünï-42/x"])
def test_every_customer_id_length_round_trips_in_an_unpadded_token(tenant, external_id):
    token = identity_token_make(tenant=tenant, external_id=external_id)
    assert "=" not in token  # URL-safe base64 without padding, as the docs' recipe makes it
    assert identity_token_verify(tenant=tenant, token=token).external_id == external_id


def test_each_refused_identity_token_names_its_field_and_reason(tenant, other_tenant):
    now = int(time.time())
    good = identity_token_make(tenant=tenant, external_id="alice")
    refusals = {
        "too few parts": "v2.YQ.1",
        "expiry not a number": "v1.YQ.soon.00",
        "another site's": identity_token_make(tenant=other_tenant, external_id="alice"),
        "expired": identity_token_make(tenant=tenant, external_id="alice", ttl_seconds=-5),
        "too long-lived": identity_token_make(
            tenant=tenant, external_id="alice", ttl_seconds=10 * 365 * 86400
        ),
    }
    found = {
        what: _failure(lambda token=token: identity_token_verify(tenant=tenant, token=token))
        for what, token in refusals.items()
    }
    assert identity_token_verify(tenant=tenant, token=good).expires_at > now
    max_lifetime = tenant.identity_token_max_lifetime_s
    assert found == {
        "too few parts": ("invalid_identity", "identity", "Malformed identity token."),
        "expiry not a number": ("invalid_identity", "identity", "Malformed identity token."),
        "another site's": (
            "invalid_identity",
            "identity",
            "Identity token signature does not match.",
        ),
        "expired": ("invalid_identity", "identity", "Identity token has expired."),
        "too long-lived": (
            "invalid_identity",
            "identity",
            "Identity token lives too long: it may expire at most "
            f"{max_lifetime} s after it is made.",
        ),
    }


def test_a_customer_id_of_1_to_200_characters_is_accepted_and_no_other(tenant):
    for external_id in ("x", "x" * 200):
        token = identity_token_make(tenant=tenant, external_id=external_id)
        assert identity_token_verify(tenant=tenant, token=token).external_id == external_id
    for external_id in ("", "x" * 201):
        token = identity_token_make(tenant=tenant, external_id=external_id)
        assert _failure(lambda token=token: identity_token_verify(tenant=tenant, token=token)) == (
            "invalid_identity",
            "identity",
            "Identity token names no valid customer id.",
        )
