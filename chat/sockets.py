"""Open chat sockets per client address, counted in this web process.

`CHAT_SOCKETS_PER_IP` bounds how many chat sockets one address may hold open on one daphne
process at once (each holds memory, a channel-layer subscription and a file descriptor), so
one client cannot exhaust a process. Counting happens on the process's event loop (connect and
disconnect of every socket run there), so no lock is needed; a socket that was refused never
counted and never releases. Behind a load balancer each process counts its own sockets.
"""

from __future__ import annotations

from collections import Counter

from django.conf import settings


class SocketCounter:
    """Sockets open per address; `acquire` refuses past the configured cap."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()

    def acquire(self, address: str) -> bool:
        """Count one more socket of `address`; False (nothing counted) when it holds the cap."""
        cap = settings.CHAT_SOCKETS_PER_IP
        if cap > 0 and self.open[address] >= cap:
            return False
        self.open[address] += 1
        return True

    def release(self, address: str) -> None:
        """One socket of `address` closed."""
        self.open[address] -= 1
        if self.open[address] <= 0:
            del self.open[address]


chat_sockets = SocketCounter()
