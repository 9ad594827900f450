import pytest

from actions import services
from actions.tests.shop import shop_connect
from conversations import services as conversation_services


@pytest.fixture
def shop(tenant, orders):
    """`tenant` pointed at the reference order service (1 s timeout), default policy."""
    return shop_connect(tenant, orders, timeout_seconds=1.0)


def _verified(tenant, external_id):
    customer = conversation_services.customer_get_or_create_verified(
        tenant=tenant, external_id=external_id, name=external_id
    )
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    return customer, conversation


@pytest.fixture
def alice(tenant):
    """Verified customer cust-1001 (owns A-1042..A-1045) in a fresh conversation."""
    return _verified(tenant, "cust-1001")


@pytest.fixture
def bob(tenant):
    """Verified customer cust-1002 (owns A-2001..A-2003) in a fresh conversation."""
    return _verified(tenant, "cust-1002")


@pytest.fixture
def visitor(tenant):
    customer = conversation_services.customer_get_or_create_visitor(
        tenant=tenant, visitor_id="anon-1"
    )
    return customer, conversation_services.conversation_start(tenant=tenant, customer=customer)


def propose_and_run(who, tool, source="intent", confirm=True, **arguments):
    """Propose and check; a write card is then confirmed by the customer (unless `confirm`
    is False), exactly as the chat page's Confirm button does."""
    customer, conversation = who
    action = services.action_propose(
        conversation=conversation,
        customer=customer,
        tool=tool,
        arguments=arguments,
        source=source,
    )
    action = services.action_run(action_id=action.pk)
    if confirm and action.state == "awaiting_confirmation":
        action = services.action_confirm(
            action_id=action.pk, customer=customer, expected_version=action.version
        )
    return action
