"""The request path: answer cache, first-words budget, turn slots; handoff escalation."""

import os

from config.env import env

# --------------------------------------------------------------------------- conversations
ANSWER_CACHE_ENABLED = env.bool("ANSWER_CACHE_ENABLED", default=True)
# A generated answer must show its first verified sentence this soon after the message
# (search included), else the customer gets the extractive answer at once.
ANSWER_FIRST_WORDS_BUDGET_S = env.float("ANSWER_FIRST_WORDS_BUDGET_S", default=0.8)
# A reply left unfinished this long (its process died) is taken over; the sweeper answers
# acknowledged messages whose reply is missing or stuck past it.
ANSWER_STALE_AFTER_S = env.float("ANSWER_STALE_AFTER_S", default=90.0)
# A message whose turn raised or whose process died is re-driven by the reply sweeper at most
# this many times; then it ends `failed` and the customer is told so.
ANSWER_MAX_REDRIVE_ATTEMPTS = env.int("ANSWER_MAX_REDRIVE_ATTEMPTS", default=3)
# Turns answered at once by one web process (each holds a thread and a database connection
# while it runs); more wait their turn.
ORCHESTRATOR_MAX_CONCURRENT_TURNS = env.int("ORCHESTRATOR_MAX_CONCURRENT_TURNS", default=12)
# Of those, at most this many for one tenant (0: half of them), so a tenant whose order
# system hangs never holds every slot.
ORCHESTRATOR_MAX_TURNS_PER_TENANT = env.int("ORCHESTRATOR_MAX_TURNS_PER_TENANT", default=0)
# Slots kept for tenants with no turn running (-1: a quarter of the slots, at least 1): busy
# tenants together leave them free, so two tenants can never hold every slot and a third
# tenant's turn still runs at once.
ORCHESTRATOR_TURN_SLOTS_RESERVED = env.int("ORCHESTRATOR_TURN_SLOTS_RESERVED", default=-1)
# Threads of the per-process executor for CPU work of turns (embedding, verification) and the
# size of the process's cache of split passages.
ORCHESTRATOR_CPU_WORKERS = max(1, env.int("ORCHESTRATOR_CPU_WORKERS", default=os.cpu_count() or 2))
ORCHESTRATOR_SENTENCE_CACHE_ENTRIES = env.int("ORCHESTRATOR_SENTENCE_CACHE_ENTRIES", default=20000)

# --------------------------------------------------------------------------- chat sockets
# Chat sockets one client address may hold open on one web process (0: no cap); past it the
# handshake is refused (chat/sockets.py).
CHAT_SOCKETS_PER_IP = env.int("CHAT_SOCKETS_PER_IP", default=100)
# A chat socket without a successful session.start this many seconds after it opened is
# closed (code 4408).
CHAT_SESSION_START_TIMEOUT_S = env.float("CHAT_SESSION_START_TIMEOUT_S", default=10.0)

# --------------------------------------------------------------------------- handoffs
HANDOFF_ESCALATE_AFTER_SECONDS = env.int("HANDOFF_ESCALATE_AFTER_SECONDS", default=300)
