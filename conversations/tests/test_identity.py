import time

import pytest

from conversations.identity import (
    IdentityError,
    identity_token_make,
    identity_token_verify,
    visitor_token_make,
    visitor_token_verify,
)


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
