"""Screenshot three answers of the demo help center in headless Chromium (docs/screenshots/).

Starts the whole stack as `make run` does (a fresh database, free loopback ports, no model
worker: the answers are the extractive ones every customer gets when the model is out), asks
questions in the customer chat (the last a follow-up of the one before) and saves three
screenshots as `docs/screenshots/<label>-<n>.png`: a question whose answer is in a table, a
list of exceptions, and a follow-up ("and what if I don't get the email?").

    .venv/bin/python scripts/answer_screenshots.py before
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from playwright.sync_api import sync_playwright  # noqa: E402

from supportbot.tests import stack  # noqa: E402
from supportbot.tests.chromium import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

# (question, answers it follows up) — the third continues the conversation of the second.
QUESTIONS = [
    "how long does shipping take",
    "can i return bear spray",
    "how do I reset my password?",
    "and what if I don't get the email?",
]
FOLLOW_UPS = {4}  # asked in the conversation of the question before
SHOTS = {1: 1, 2: 2, 4: 3}  # question number -> screenshot number


def main(label: str) -> None:
    out = ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    running = stack.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = None
            for n, question in enumerate(QUESTIONS, start=1):
                if n not in FOLLOW_UPS:
                    if page is not None:
                        page.close()
                    context = browser.new_context(viewport={"width": 420, "height": 820})
                    page = context.new_page()
                    page.goto(f"{running.url}/chat/acme/")
                    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
                before = page.locator("article.msg.bot .sources").count()
                page.fill("#input", question)
                page.click("#send")
                page.wait_for_function(
                    "n => document.querySelectorAll('article.msg.bot .sources').length > n",
                    arg=before,
                    timeout=30000,
                )
                page.wait_for_timeout(500)
                if n in SHOTS:
                    page.screenshot(path=str(out / f"{label}-{SHOTS[n]}.png"), full_page=True)
            browser.close()
    finally:
        stack.drop(running)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "before")
