"""Pick a worker: role tiers, then a load + affinity score, least-loaded when imbalanced.

Pure functions over `WorkerView` snapshots, so every decision is unit-testable.

- Role tiers: `small` -> small workers, then any; `primary` -> primary, then `fallback`, then
  any; `fallback` -> fallback, then any. One CPU engine can serve every role.
- Eligible: ready, healthy, breaker allows an attempt, and not saturated. Saturated means stale
  metrics (older than `stale_after_s`), a long engine queue or a nearly full KV cache.
- Load: outstanding requests (engine running + waiting, or this process's in-flight count if
  that is higher because metrics lag) normalised by `queue_norm`, plus KV use, weighted
  `w_queue` / `w_kv` (2 / 2).
- Affinity: the caller's key (a conversation), else the prompt's system-message prefix.
  Rendezvous hashing of the affinity key over the tier's eligible workers names a
  home worker (stable: when it goes, only its keys move). The home gets a bonus `w_affinity`
  (3) so a conversation stays put while its worker is not overloaded.
- Imbalance: when the busiest and idlest eligible worker differ by more than `imbalance_abs`
  requests and by a factor `imbalance_rel`, rank by load alone (least-loaded first).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

ROLE_TIERS: dict[str, tuple[str | None, ...]] = {
    "small": ("small", None),
    "primary": ("primary", "fallback", None),
    "fallback": ("fallback", None),
}


@dataclass(frozen=True)
class WorkerView:
    """What the router knows of one worker at decision time."""

    key: str  # unique and stable (the registry name)
    role: str
    ready: bool  # registry state allows new admissions (not starting/draining/stopped)
    healthy: bool
    breaker_allows: bool
    metrics_age_s: float | None  # None: never scraped
    running: float = 0.0
    waiting: float = 0.0
    kv_cache_usage: float = 0.0
    local_inflight: int = 0


@dataclass(frozen=True)
class RouterWeights:
    w_queue: float = 2.0
    w_kv: float = 2.0
    w_affinity: float = 3.0
    queue_norm: float = 4.0
    imbalance_abs: float = 4.0
    imbalance_rel: float = 2.0
    stale_after_s: float = 3.0
    max_waiting: float = 8.0
    max_kv: float = 0.95


@dataclass(frozen=True)
class Decision:
    """Ranked candidates (best first), the tier used, and why nothing was eligible if empty."""

    ranked: list[WorkerView]
    tier: str | None
    reason: str  # "affinity", "score", "least_loaded", "no_worker", "saturated"


def outstanding(w: WorkerView) -> float:
    """Requests in flight on the worker as best known now."""
    return max(w.running + w.waiting, float(w.local_inflight))


def is_saturated(w: WorkerView, weights: RouterWeights) -> bool:
    if w.metrics_age_s is None or w.metrics_age_s > weights.stale_after_s:
        return True
    return w.waiting >= weights.max_waiting or w.kv_cache_usage >= weights.max_kv


def is_available(w: WorkerView) -> bool:
    """Could take work at all (ignoring load)."""
    return w.ready and w.healthy and w.breaker_allows


def load(w: WorkerView, weights: RouterWeights) -> float:
    return weights.w_queue * outstanding(w) / weights.queue_norm + weights.w_kv * w.kv_cache_usage


def rendezvous_home(affinity_key: str, workers: list[WorkerView]) -> WorkerView | None:
    """Highest-random-weight choice: the same key picks the same worker while it is present."""

    def weight(w: WorkerView) -> int:
        digest = hashlib.blake2b(f"{affinity_key}\x00{w.key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big")

    return max(workers, key=weight, default=None)


def prefix_affinity_key(messages: list[dict], *, chars: int = 2000) -> str | None:
    """A key for the prompt's stable prefix (the system message), so requests that share it
    prefer the worker that already holds it in its prefix cache; None without one."""
    if not messages or messages[0].get("role") != "system":
        return None
    content = str(messages[0].get("content") or "")[:chars]
    if not content:
        return None
    return "prefix:" + hashlib.blake2b(content.encode(), digest_size=12).hexdigest()


def _in_tier(w: WorkerView, tier: str | None) -> bool:
    return tier is None or w.role == tier


def choose(
    workers: list[WorkerView],
    *,
    role: str,
    affinity_key: str | None = None,
    exclude: frozenset[str] = frozenset(),
    weights: RouterWeights | None = None,
) -> Decision:
    """Rank the eligible workers of the first role tier that has any.

    An empty ranking has reason "no_worker" when no worker could take work at all, or
    "saturated" when some could but all are saturated (the caller may wait for the queue
    deadline, then answer 503 with Retry-After).
    """
    weights = weights or RouterWeights()
    if role not in ROLE_TIERS:
        raise ValueError(f"unknown role {role!r}; expected one of {sorted(ROLE_TIERS)}")
    pool = [w for w in workers if w.key not in exclude and is_available(w)]
    if not pool:
        return Decision([], None, "no_worker")
    for tier in ROLE_TIERS[role]:
        members = [w for w in pool if _in_tier(w, tier)]
        eligible = [w for w in members if not is_saturated(w, weights)]
        if eligible:
            return _rank(eligible, tier, affinity_key, weights)
    return Decision([], None, "saturated")


def _rank(
    eligible: list[WorkerView], tier: str | None, affinity_key: str | None, weights: RouterWeights
) -> Decision:
    loads = {w.key: load(w, weights) for w in eligible}
    counts = [outstanding(w) for w in eligible]
    busiest, idlest = max(counts), min(counts)
    imbalanced = (
        len(eligible) > 1
        and busiest - idlest > weights.imbalance_abs
        and busiest > weights.imbalance_rel * max(idlest, 1.0)
    )
    if imbalanced:
        ranked = sorted(eligible, key=lambda w: (loads[w.key], w.key))
        return Decision(ranked, tier, "least_loaded")
    home = rendezvous_home(affinity_key, eligible) if affinity_key else None

    def score(w: WorkerView) -> float:
        bonus = weights.w_affinity if home is not None and w.key == home.key else 0.0
        return loads[w.key] - bonus

    ranked = sorted(eligible, key=lambda w: (score(w), w.key))
    reason = "affinity" if home is not None and ranked[0].key == home.key else "score"
    return Decision(ranked, tier, reason)
