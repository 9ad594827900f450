"""The request path — the only place that combines knowledge, inference, actions and handoffs.

WebSocket and REST both call `handle_customer_message`. The customer message is saved first
(a repeated client_message_id returns the saved result); the reply row is reserved before any
generation (one official answer per customer message); every model sentence is verified
against the retrieved passages before the customer sees it; when the model is unavailable,
measured useless (`inference.yields`) or slow, the customer gets an extractive answer quoted
from the best passages at once, or a handoff. Every conversation event goes through the
conversation's channel-layer group (`conversations.events`).

Modules: `turn` (entry points, path choice), `slots` (where a turn runs), `knowledge_answer`
(search, cache, generation or extractive), `weak` (weak evidence), `base` (types, threads, CPU
pool, per-turn embeddings), `prompt`, `generate` (verified streaming), `extractive` (quotes,
citations), `answer_cache`, `tools` (order tools and proposal cards), `handoff`, `finish`.
"""

from chat.orchestrator.base import Draft, Emit, Outcome
from chat.orchestrator.handoff import request_handoff
from chat.orchestrator.prompt import PROMPT_VERSION
from chat.orchestrator.tools import answer_action
from chat.orchestrator.turn import handle_customer_message, respond

__all__ = [
    "PROMPT_VERSION",
    "Draft",
    "Emit",
    "Outcome",
    "answer_action",
    "handle_customer_message",
    "request_handoff",
    "respond",
]
