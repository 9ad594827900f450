"""Conversations with known endings, written straight to the tables (timestamps included)."""

import uuid

import factory

from actions.models import ActionRequest
from conversations.models import Conversation, Customer, Feedback, Message
from handoffs.models import Handoff
from supportbot.tests.factories import TenantFactory


class _Timestamped(factory.django.DjangoModelFactory):
    """`at=` sets `created_at`, which `auto_now_add` would otherwise stamp with now."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class, *args, at=None, **kwargs):
        obj = super()._create(model_class, *args, **kwargs)
        if at is not None:
            model_class.objects.filter(pk=obj.pk).update(created_at=at)
            obj.created_at = at
        return obj


class CustomerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Customer

    tenant = factory.SubFactory(TenantFactory)
    external_id = factory.Sequence(lambda n: f"cust-{n}")
    verified = True


class ConversationFactory(_Timestamped):
    class Meta:
        model = Conversation

    tenant = factory.SubFactory(TenantFactory)
    customer = factory.SubFactory(CustomerFactory, tenant=factory.SelfAttribute("..tenant"))


class MessageFactory(_Timestamped):
    class Meta:
        model = Message

    conversation = factory.SubFactory(ConversationFactory)
    tenant = factory.SelfAttribute("conversation.tenant")
    role = Message.Role.CUSTOMER
    kind = Message.Kind.TEXT
    state = Message.State.ANSWERED
    text = "Hello"


class BotReplyFactory(MessageFactory):
    role = Message.Role.BOT
    kind = Message.Kind.ANSWER
    state = Message.State.DELIVERED
    text = "Here is the answer."


class FeedbackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Feedback

    message = factory.SubFactory(BotReplyFactory)
    tenant = factory.SelfAttribute("message.tenant")
    rating = Feedback.Rating.HELPFUL


class HandoffFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Handoff

    conversation = factory.SubFactory(ConversationFactory)
    tenant = factory.SelfAttribute("conversation.tenant")
    reason = Handoff.Reason.CUSTOMER_REQUEST
    state = Handoff.State.QUEUED


class ActionRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ActionRequest

    conversation = factory.SubFactory(ConversationFactory)
    tenant = factory.SelfAttribute("conversation.tenant")
    customer = factory.SelfAttribute("conversation.customer")
    tool = "request_refund"
    arguments = factory.LazyFunction(lambda: {"order_id": "A-1042", "amount": "25.00"})
    retry_key = factory.LazyFunction(lambda: uuid.uuid4().hex)
    dedupe_key = factory.LazyFunction(lambda: uuid.uuid4().hex)
    risk = ActionRequest.Risk.LOW
    state = ActionRequest.State.SUCCEEDED
    proposed_by = ActionRequest.Source.INTENT
