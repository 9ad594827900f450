import pytest

from chat.tests.helpcenter import (
    RETURNS_MD,
    SECRET_MD,
    SHIPPING_MD,
    WARRANTY_MD,
    index_document,
)
from conversations import services


@pytest.fixture
def help_center(tenant):
    return {
        "returns": index_document(tenant, "Returns and refunds", RETURNS_MD),
        "shipping": index_document(tenant, "Shipping", SHIPPING_MD),
        "warranty": index_document(tenant, "Warranty", WARRANTY_MD),
        "internal": index_document(tenant, "Escalation playbook", SECRET_MD, audience="agents"),
    }


@pytest.fixture
def other_help_center(other_tenant):
    return index_document(
        other_tenant,
        "Globex returns",
        "# Globex returns\n\nGlobex accepts returns within 365 days for a full refund, "
        "no questions asked.\n",
    )


@pytest.fixture
def customer(tenant):
    return services.customer_get_or_create_visitor(tenant=tenant, visitor_id="visitor-1")


@pytest.fixture
def conversation(tenant, customer):
    return services.conversation_start(tenant=tenant, customer=customer)
