"""Partner REST API for conversations (API key). One view per operation, one concern a module."""

from chat.api.actions import ANSWER_RESPONSES, ActionAnswerApi, ActionCancelApi, ActionConfirmApi
from chat.api.conversations import ConversationCreateApi
from chat.api.feedback import FeedbackCreateApi
from chat.api.handoffs import HandoffCreateApi
from chat.api.messages import ConversationMessagesApi, EventStreamRenderer, MessagePagination
from chat.api.openapi import IDEMPOTENCY_ERRORS, IDEMPOTENCY_HEADER, INVALID, NOT_FOUND
from chat.api.serializers import (
    ActionCardSerializer,
    CitationSerializer,
    ConversationSerializer,
    MessageSerializer,
)

__all__ = [
    "ANSWER_RESPONSES",
    "IDEMPOTENCY_ERRORS",
    "IDEMPOTENCY_HEADER",
    "INVALID",
    "NOT_FOUND",
    "ActionAnswerApi",
    "ActionCancelApi",
    "ActionCardSerializer",
    "ActionConfirmApi",
    "CitationSerializer",
    "ConversationCreateApi",
    "ConversationMessagesApi",
    "ConversationSerializer",
    "EventStreamRenderer",
    "FeedbackCreateApi",
    "HandoffCreateApi",
    "MessagePagination",
    "MessageSerializer",
]
