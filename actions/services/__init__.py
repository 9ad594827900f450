"""Writes of the action ledger: propose → check → confirm → admit → (approve) → execute.

The model (or a deterministic intent) only proposes. Server code validates the arguments
against the tool's schema, checks the customer's identity, their ownership of the order and
the tenant's policy; a write tool then waits for the customer's explicit confirmation of that
exact proposal (id + version), is admitted against the limits under a per-customer row lock,
waits for a person when policy says so, and executes through the provider with the ledger's
retry key as the Idempotency-Key. Every state change is a conditional UPDATE on
(state, version) with an audit event in the same transaction.

One concern per module: `config` (provider connection, policy), `ledger` (keys, transitions,
events), `propose` (validation, dedupe, checks), `confirm` (confirmation, cancellation,
admission under the limit lock), `answer` (a customer's answer from any channel), `execute`
(send, settle, resolve by lookup), `decide` (approvals and roles), `sweep` (expiry, stuck rows,
customer notices), `policies` (the policies tenant admins edit in the console, audited with
old and new values).
"""

from actions.services.answer import action_answer
from actions.services.config import (
    ProviderNotConfigured,
    action_policy_get,
    action_policy_set,
    provider_config_set,
)
from actions.services.confirm import action_cancel, action_confirm
from actions.services.decide import action_decide
from actions.services.execute import action_run
from actions.services.ledger import dedupe_key_for, retry_key_for
from actions.services.policies import Policies, policies_get, policies_set
from actions.services.propose import action_propose, order_keys_rekey
from actions.services.sweep import (
    action_attach_card,
    action_mark_notified,
    action_show_card,
    actions_sweep,
    notify_customer,
)

__all__ = [
    "Policies",
    "ProviderNotConfigured",
    "action_answer",
    "action_attach_card",
    "action_cancel",
    "action_confirm",
    "action_decide",
    "action_mark_notified",
    "action_policy_get",
    "action_policy_set",
    "action_propose",
    "action_show_card",
    "action_run",
    "actions_sweep",
    "dedupe_key_for",
    "notify_customer",
    "order_keys_rekey",
    "policies_get",
    "policies_set",
    "provider_config_set",
    "retry_key_for",
]
