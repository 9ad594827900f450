"""A process that takes over one stale reply (for the two-process race test).

`python -m chat.tests.race_takeover <message id> <go file>` waits until the go file
exists, then answers the message the way the sweeper does, and prints the outcome as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from asgiref.sync import async_to_sync

    from chat import orchestrator
    from conversations.models import Message

    message_id, go = int(sys.argv[1]), Path(sys.argv[2])
    message = Message.objects.get(pk=message_id)
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    outcome = async_to_sync(orchestrator.respond)(
        conversation_id=message.conversation_id, message=message
    )
    print(json.dumps({"answered": outcome.reply is not None}))


if __name__ == "__main__":
    main()
