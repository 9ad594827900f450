"""The customer chat in a real browser (Debian Chromium) on make run's stack."""

import re
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chat.identity import identity_token_make
from supportbot.models import Tenant

pytestmark = pytest.mark.browser
SHOTS = "var/screenshots"


def test_customer_asks_sees_streamed_cited_answer_rates_it_and_asks_for_a_human(
    live_stack, browser, csp
):
    earlier = {row[0] for row in live_stack.sql("SELECT id FROM handoffs_handoff")}
    rated = {row[0] for row in live_stack.sql("SELECT id FROM conversations_feedback")}
    page = csp.watch(browser.new_page(viewport={"width": 390, "height": 780}))  # a phone
    page.goto(f"{live_stack.url}/chat/acme/")
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
    page.fill("#input", "How long does it take for a refund to reach my credit card?")
    page.click("#send")

    answer = page.locator("article.msg.bot").last
    answer.locator(".body").wait_for(timeout=30000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('article.msg.bot .body')]"
        ".some(b => /business days/.test(b.textContent))",
        timeout=30000,
    )
    source = answer.locator(".sources a").first
    source.wait_for(timeout=30000)
    assert re.search(r"\[1\] (Refunds|Returns)", source.inner_text())
    href = source.get_attribute("href")
    assert "/kb/acme/" in href
    assert answer.locator(".sources blockquote").first.inner_text()

    helpful = answer.locator(".rate button[data-rating='helpful']")
    helpful.click()
    page.wait_for_function(
        "() => document.querySelector(\".rate button[data-rating='helpful']\")"
        ".getAttribute('aria-pressed') === 'true'",
        timeout=10000,
    )
    ratings = live_stack.sql("SELECT id, rating FROM conversations_feedback")
    assert [rating for i, rating in ratings if i not in rated] == ["helpful"]

    no_overflow = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert no_overflow
    page.screenshot(path=f"{SHOTS}/chat-answer.png")

    page.click("#human")
    page.wait_for_selector("#notice:has-text('person from our team')", timeout=15000)
    page.screenshot(path=f"{SHOTS}/chat-handoff.png")
    handoffs = live_stack.sql("SELECT id, reason, state FROM handoffs_handoff ORDER BY id")
    # Only this page's handoff (the stack is shared: other tests' handoffs are not ours).
    assert [(r, s) for i, r, s in handoffs if i not in earlier] == [("customer_request", "queued")]

    # The source link opens the cited passage.
    target = csp.watch(browser.new_page())
    target.goto(f"{live_stack.url}{href}")
    assert "business days" in target.content()
    target.close()
    page.close()
    assert csp.violations == []


def test_reload_resumes_the_conversation_without_duplicates(live_stack, browser, csp):
    context = browser.new_context()
    page = csp.watch(context.new_page())
    page.goto(f"{live_stack.url}/chat/acme/")
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
    page.fill("#input", "Is standard shipping free?")
    page.click("#send")
    page.wait_for_selector("article.msg.bot .sources", timeout=30000)
    before = page.locator("article.msg").count()
    page.reload()
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
    page.wait_for_function(f"() => document.querySelectorAll('article.msg').length >= {before}")
    assert page.locator("article.msg").count() == before
    context.close()
    assert csp.violations == []


def serve_shop(live_stack, identity: str | None = None, *, tenant: str = "acme"):
    """A tenant's site on another origin (its own loopback server) embedding the widget."""
    attribute = f' data-identity="{identity}"' if identity else ""
    html = (
        f'<html><body><h1>{tenant} shop</h1><script src="{live_stack.url}/widget.js" '
        f'data-tenant="{tenant}"{attribute}></script></body></html>'
    ).encode()

    class Shop(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's API
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args):
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://localhost:{server.server_address[1]}"


def set_allowed_origins(live_stack, origins: list[str]) -> None:
    live_stack.sql(
        "UPDATE supportbot_tenant SET allowed_origins = %s WHERE slug = 'acme' RETURNING id",
        (origins,),
    )


@pytest.fixture
def shop_site(live_stack):
    """The shop on an origin acme allows (Tenant.allowed_origins)."""
    server, origin = serve_shop(live_stack)
    set_allowed_origins(live_stack, [origin])
    yield f"{origin}/"
    set_allowed_origins(live_stack, [])
    server.shutdown()


@pytest.fixture
def foreign_site(live_stack):
    """The same page on an origin acme does not allow."""
    server, origin = serve_shop(live_stack)
    yield f"{origin}/"
    server.shutdown()


def test_widget_script_opens_the_chat_in_an_iframe(live_stack, browser, shop_site, csp):
    page = csp.watch(browser.new_page())
    page.goto(shop_site)
    page.click("#supportbot-launcher")
    frame = page.frame_locator("#supportbot-frame")
    frame.locator("#status:has-text('Online')").wait_for(timeout=20000)
    assert frame.locator("#chat-title").inner_text().startswith("Acme")
    page.screenshot(path=f"{SHOTS}/widget.png")
    page.close()
    assert csp.violations == []


def test_widget_hands_the_identity_token_over_by_post_message_never_in_a_url(
    live_stack, browser, csp
):
    secret = live_stack.sql("SELECT widget_secret FROM supportbot_tenant WHERE slug = 'acme'")[0][0]
    token = identity_token_make(tenant=Tenant(widget_secret=secret), external_id="cust-widget")
    server, origin = serve_shop(live_stack, identity=token)
    set_allowed_origins(live_stack, [origin])
    try:
        page = csp.watch(browser.new_page())
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(f"{origin}/")
        page.click("#supportbot-launcher")
        frame = page.frame_locator("#supportbot-frame")
        frame.locator("#status:has-text('Online')").wait_for(timeout=20000)
        query = "SELECT verified FROM conversations_customer WHERE external_id = %s"
        assert live_stack.sql(query, ("cust-widget",)) == [(True,)]
        assert requested
        assert not [url for url in requested if token in url]
        assert token not in (live_stack.log_dir / "daphne.log").read_text()
        page.close()
    finally:
        set_allowed_origins(live_stack, [])
        server.shutdown()
    assert csp.violations == []


def test_a_site_not_in_the_allowed_origins_cannot_frame_the_chat(
    live_stack, browser, foreign_site, csp
):
    page = csp.watch(browser.new_page())
    page.goto(foreign_site)
    page.click("#supportbot-launcher")
    page.wait_for_function(
        "() => document.querySelector('#supportbot-frame').src !== ''", timeout=5000
    )
    page.wait_for_timeout(2000)
    frames = [f for f in page.frames if f != page.main_frame]
    assert frames
    assert all(f.query_selector("#chat-title") is None for f in frames)
    assert any("frame-ancestors" in v for v in csp.violations), csp.violations
    page.close()


def _signed_in_chat_url(live_stack, external_id: str) -> str:
    """The chat page as the tenant's site links it for a signed-in customer."""
    secret = live_stack.sql("SELECT widget_secret FROM supportbot_tenant WHERE slug = 'acme'")[0][0]
    token = identity_token_make(tenant=Tenant(widget_secret=secret), external_id=external_id)
    return f"{live_stack.url}/chat/acme/#identity={token}"  # a fragment never reaches logs


def _provider_refunds(live_stack, cents: int) -> int:
    with sqlite3.connect(live_stack.log_dir / "orders.sqlite3") as db:
        return db.execute(
            "SELECT count(*) FROM refunds WHERE order_id = 'A-1043' AND amount_cents = ?", (cents,)
        ).fetchone()[0]


def test_refund_card_confirm_shows_the_provider_result_and_cancel_executes_nothing(
    live_stack, browser, csp
):
    # The stack is shared: a card another test left open for this order would be shown again
    # instead of a new one (one live card per order), so earlier ones are let expire first.
    live_stack.sql(
        "UPDATE actions_actionrequest SET state = 'expired' "
        "WHERE state = 'awaiting_confirmation' RETURNING id"
    )
    context = browser.new_context()
    page = csp.watch(context.new_page())
    page.goto(_signed_in_chat_url(live_stack, "cust-1001"))
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)

    page.fill("#input", "Please refund $12 for order A-1043, one pole was bent")
    page.click("#send")
    card = page.locator(".action-card[data-state='awaiting_confirmation']").last
    card.wait_for(timeout=30000)
    assert "Refund $12.00 for order A-1043" in card.inner_text()
    assert _provider_refunds(live_stack, 1200) == 0  # nothing ran from the message
    page.screenshot(path=f"{SHOTS}/chat-refund-card.png")

    card.locator("button.confirm").click()
    done = page.locator(".action-card[data-state='succeeded']").last
    done.wait_for(timeout=30000)
    assert "confirmed by our payment system" in done.inner_text()
    assert "Reference: rf_" in done.inner_text()
    page.wait_for_function(
        "() => [...document.querySelectorAll('article.msg .body')]"
        ".some(b => /submitted and confirmed/.test(b.textContent))",
        timeout=15000,
    )
    assert _provider_refunds(live_stack, 1200) == 1
    page.screenshot(path=f"{SHOTS}/chat-refund-confirmed.png")

    page.fill("#input", "refund $13 for A-1043 please")
    page.click("#send")
    second = page.locator(".action-card[data-state='awaiting_confirmation']").last
    second.wait_for(timeout=30000)
    second.locator("button.cancel").click()
    page.locator(".action-card[data-state='cancelled']").last.wait_for(timeout=15000)

    # A reload shows each card in its saved state, with no buttons left to press.
    page.reload()
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
    page.locator(".action-card[data-state='succeeded']").first.wait_for(timeout=15000)
    page.locator(".action-card[data-state='cancelled']").first.wait_for(timeout=15000)
    assert page.locator(".action-card button.confirm").count() == 0
    assert _provider_refunds(live_stack, 1200) == 1
    assert _provider_refunds(live_stack, 1300) == 0
    # Arguments are encrypted at rest: the amounts are proven by the provider's refunds above
    # and the rows, in proposal order (12.00 first), hold only sealed text.
    rows = live_stack.sql(
        "SELECT arguments, state FROM actions_actionrequest "
        "WHERE tool = 'request_refund' ORDER BY id"
    )
    assert [state for _, state in rows][-2:] == ["succeeded", "cancelled"]
    assert all(arguments.startswith("sb1:") and "12.00" not in arguments for arguments, _ in rows)
    context.close()
    assert csp.violations == []


STOVE_DOC = (
    "# Stove fuel\n\n"
    "Our trip planner computes the fuel a trip needs. To compute it yourself in Python, "
    "write the fuel_needed function like this:\n\n"
    "```python\n"
    "def fuel_needed(days, people):\n"
    "    grams = days * people * 25\n"
    "    if grams < 100:\n"
    "        grams = 100\n"
    "    return grams\n"
    "```\n\n"
    "The result is in grams of isobutane; round up to the next canister size.\n"
)
UPLOAD = """
from django.core.files.base import ContentFile
from knowledge import services
from supportbot.services import Actor, tenant_create
tenant = tenant_create(slug="stove-docs", name="Stove docs")
services.document_upload(
    tenant=tenant, file=ContentFile({data!r}, name="stove-fuel.md"), actor=Actor.system("test")
)
"""


def test_a_quoted_code_block_shows_its_lines_and_their_indentation(live_stack, browser, csp):
    """A tenant of its own (the demo's answers stay as the other tests expect them)."""
    live_stack.manage("shell", "-c", UPLOAD.format(data=STOVE_DOC.encode()))
    for _ in range(120):
        ready = live_stack.sql(
            "SELECT count(*) FROM knowledge_document d JOIN supportbot_tenant t "
            "ON t.id = d.tenant_id WHERE t.slug = 'stove-docs' AND d.status = 'ready'"
        )
        if ready[0][0]:
            break
        time.sleep(0.5)
    page = csp.watch(browser.new_page(viewport={"width": 420, "height": 820}))
    page.goto(f"{live_stack.url}/chat/stove-docs/")
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
    page.fill("#input", "how do i write the fuel_needed function in python")
    page.click("#send")
    page.wait_for_function(
        "() => [...document.querySelectorAll('article.msg.bot .body')]"
        ".some(b => /return grams/.test(b.textContent))",
        timeout=30000,
    )
    shown = page.locator("article.msg.bot .body").last.inner_text()
    assert (
        "like this:\n"
        "def fuel_needed(days, people):\n"
        "    grams = days * people * 25\n"
        "    if grams < 100:\n"
        "        grams = 100\n"
        "    return grams\n"
        "The result is in grams"
    ) in shown
    page.screenshot(path=f"{SHOTS}/chat-code-answer.png")
    page.close()
    assert csp.violations == []
