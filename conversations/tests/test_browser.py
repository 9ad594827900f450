"""The customer chat in a real browser (Debian Chromium) on make run's stack."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.browser
SHOTS = "var/screenshots"


def test_customer_asks_sees_streamed_cited_answer_rates_it_and_asks_for_a_human(
    live_stack, browser, csp
):
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
    rating = live_stack.sql("SELECT rating FROM conversations_feedback")
    assert rating == [("helpful",)]

    no_overflow = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert no_overflow
    page.screenshot(path=f"{SHOTS}/chat-answer.png")

    page.click("#human")
    page.wait_for_selector("#notice:has-text('person from our team')", timeout=15000)
    page.screenshot(path=f"{SHOTS}/chat-handoff.png")
    assert live_stack.sql("SELECT reason, state FROM handoffs_handoff") == [
        ("customer_request", "queued")
    ]

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


def serve_shop(live_stack):
    """A tenant's site on another origin (its own loopback server) embedding the widget."""
    html = (
        f'<html><body><h1>Acme shop</h1><script src="{live_stack.url}/widget.js" '
        'data-tenant="acme"></script></body></html>'
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
