"""XSS: markup in what customers, agents and documents write is shown as text, never run.

Every surface that renders such text (the chat page, the embedded widget, the agent console
and the `/kb/` page) is opened in Chromium with payloads in the customer's message, their
external id, the tenant's name, an agent's name, a document's title, headings and body (which
become the answer, its citations and quotes), an agent's reply, a note and the handoff summary.
Each check proves three things: no dialog opened and no payload set `window.__xss`; no element
or attribute a payload carries is in the DOM; and the payload is on the page as literal text
(so it was rendered, not dropped).

The payload pages run with `bypass_csp`: the Content-Security-Policy (no inline script) would
otherwise stop a handler an escaping bug let in, and hide the bug. A reload of each view with
the policy enforced then shows no CSP violation either.
"""

import re
import secrets
import time

import pytest

from chat.identity import identity_token_make
from chat.tests.test_browser import serve_shop
from supportbot.models import Tenant

pytestmark = pytest.mark.browser

SLUG = "xss-lab"
TENANT_NAME = 'Zebra & Co "><img src=x onerror=window.__xss=21;alert(21)></title><b>bold</b>'
DOC_TITLE = (
    "Zebra refunds <img src=x onerror=window.__xss=22;alert(22)></title><script>alert(22)</script>"
)
HEADING_1 = "Refund timing <svg onload=window.__xss=23;alert(23)>"
HEADING_2 = "Parcel tracking ' onmouseover='window.__xss=24;alert(24)' x='"
AGENT_NAME = "Sam <img src=x onerror=window.__xss=25;alert(25)>"
EXTERNAL_ID = 'cust-xss"><img src=x onerror=window.__xss=26;alert(26)>'

# Classic payloads; each one, if it ran, would set window.__xss and open a dialog.
PAYLOADS = (
    "<img src=x onerror=window.__xss=1;alert(1)>",
    "<script>window.__xss=2;alert(2)</script>",
    '"><svg onload=window.__xss=3;alert(3)>',
    "[click me](javascript:window.__xss=4;alert(4))",
    '<a href="javascript:window.__xss=5;alert(5)">link five</a>',
    "' onmouseover='window.__xss=6;alert(6)' x='",
    "</textarea><script>window.__xss=7;alert(7)</script>",
    "&lt;b&gt;entity&lt;/b&gt; &#60;script&#62;alert(8)&#60;/script&#62;",
    '![pic](x" onerror="window.__xss=9;alert(9))',
    "\u202egnp.exe<img src=x onerror=window.__xss=10;alert(10)>\u202c \uff1cscript\uff1e",
    '<iframe srcdoc="<script>parent.__xss=11;parent.alert(11)</script>"></iframe>',
    "</title></style><script>window.__xss=12;alert(12)</script>",
)
PAYLOAD_TEXT = " ".join(PAYLOADS)

DOCUMENT = (
    f"{HEADING_1}\n{'=' * len(HEADING_1)}\n\n"
    f"Zebra refunds {PAYLOADS[0]} arrive in five business days {PAYLOADS[1]} after we get "
    f"the parcel back {PAYLOADS[2]} {PAYLOADS[3]} {PAYLOADS[4]}\n\n"
    f"{HEADING_2}\n{'-' * len(HEADING_2)}\n\n"
    f"Zebra parcels are tracked daily {PAYLOADS[5]} {PAYLOADS[6]} {PAYLOADS[7]} "
    f"{PAYLOADS[8]} {PAYLOADS[9]} {PAYLOADS[10]} {PAYLOADS[11]}\n"
)
SETUP = """
from django.core.files.base import ContentFile
from knowledge import services
from supportbot.services import Actor, membership_set, tenant_create, user_ensure
actor = Actor.system("test")
tenant = tenant_create(slug={slug!r}, name={name!r}, actor=actor)
user = user_ensure(username="xss-admin", password={password!r})
user.first_name = {agent!r}
user.save(update_fields=["first_name"])
membership_set(tenant=tenant, user=user, role="admin", actor=actor)
services.document_upload(
    tenant=tenant, file=ContentFile({data!r}, name="zebra.txt"), title={title!r}, actor=actor
)
"""

# What no rendering of the pages above may contain: inline handlers, `javascript:` URLs,
# inline scripts and the elements the payloads carry (the widget's own frame aside).
INJECTED = r"""() => {
  const found = [];
  for (const e of document.querySelectorAll('*')) {
    for (const a of e.attributes) {
      if (/^on/i.test(a.name)) found.push(`${e.tagName}[${a.name}]`);
      if (/^\s*javascript:/i.test(a.value)) found.push(`${e.tagName}[${a.name}=javascript:]`);
    }
  }
  for (const e of document.querySelectorAll('script:not([src])')) found.push('inline script');
  for (const e of document.querySelectorAll(
      'img, svg, iframe:not(#supportbot-frame), object, embed, b, math')) found.push(e.tagName);
  return {found, xss: window.__xss === undefined ? null : String(window.__xss)};
}"""


def assert_inert(page, dialogs: list[str]) -> None:
    """No dialog opened, no payload ran or became an element, in any frame of `page`."""
    page.wait_for_timeout(300)  # an image error or a load handler fires within this
    assert dialogs == []
    for frame in page.frames:
        if frame.url.startswith("about:"):
            continue
        assert frame.evaluate(INJECTED) == {"found": [], "xss": None}, frame.url


def payload_context(browser, **options):
    """A context with the CSP bypassed: only the escaping stands between a payload and a run."""
    return browser.new_context(bypass_csp=True, **options)


def watched(page):
    """`page` recording (and dismissing) every dialog of its frames in `page.dialogs`."""
    page.dialogs = []

    def record(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    return page


def enforced(browser, csp, context, url: str, ready: str):
    """The same view in a context with the CSP enforced (and the same storage)."""
    strict = browser.new_context(storage_state=context.storage_state())
    page = watched(csp.watch(strict.new_page()))
    page.goto(url)
    page.wait_for_selector(ready, timeout=20000)
    assert_inert(page, page.dialogs)
    strict.close()


@pytest.fixture(scope="module")
def xss_tenant(live_stack):
    """A tenant whose name, agent and one document are payloads; returns the agent's password."""
    password = secrets.token_urlsafe(16)
    if not live_stack.sql("SELECT id FROM supportbot_tenant WHERE slug = %s", (SLUG,)):
        live_stack.manage(
            "shell",
            "-c",
            SETUP.format(
                slug=SLUG,
                name=TENANT_NAME,
                password=password,
                agent=AGENT_NAME,
                data=DOCUMENT.encode(),
                title=DOC_TITLE,
            ),
        )
    for _ in range(240):
        ready = live_stack.sql(
            "SELECT count(*) FROM knowledge_document d JOIN supportbot_tenant t "
            "ON t.id = d.tenant_id WHERE t.slug = %s AND d.status = 'ready'",
            (SLUG,),
        )
        if ready[0][0]:
            return password
        time.sleep(0.5)
    raise AssertionError("the payload document was not indexed")


def ask(page, question: str) -> None:
    """Send `question` and wait for the cited answer to it."""
    answers = page.locator("article.msg.bot .sources").count()
    page.fill("#input", question)
    page.click("#send")
    page.wait_for_function(
        f"() => document.querySelectorAll('article.msg.bot .sources').length > {answers}",
        timeout=30000,
    )


QUESTION = f"How long do zebra refunds take to arrive? {PAYLOAD_TEXT}"


def assert_chat_shows_literally(page) -> None:
    """The tenant's name, the customer's question and the cited document, as text."""
    assert page.title() == f"{TENANT_NAME} — Help"
    assert page.locator("#chat-title").inner_text() == f"{TENANT_NAME} support"
    assert TENANT_NAME in page.locator(".greeting").inner_text()
    asked = page.locator("article.msg.customer .body").last.inner_text()
    assert asked == QUESTION
    answer = page.locator("article.msg.bot").last
    source = answer.locator(".sources a").first.inner_text()
    assert source.startswith(f"[1] {DOC_TITLE} — ")
    assert HEADING_1 in source or HEADING_2 in source
    said = answer.locator(".body").inner_text() + answer.locator(".sources").inner_text()
    assert "five business days" in said
    assert any(p in said for p in PAYLOADS), said


def test_chat_page_shows_payloads_in_question_answer_and_citations_as_text(
    live_stack, browser, xss_tenant, csp
):
    context = payload_context(browser)
    page = watched(context.new_page())
    url = f"{live_stack.url}/chat/{SLUG}/"
    page.goto(url)
    page.wait_for_selector("#status:has-text('Online')", timeout=20000)
    ask(page, QUESTION)
    assert_chat_shows_literally(page)
    assert_inert(page, page.dialogs)

    # A reload renders the same history from session.ready.
    page.reload()
    page.wait_for_selector("article.msg.bot .sources", timeout=20000)
    assert_chat_shows_literally(page)
    assert_inert(page, page.dialogs)
    enforced(browser, csp, context, url, "article.msg.bot .sources")
    context.close()
    assert csp.violations == []


def test_kb_page_shows_the_documents_payload_title_headings_and_text_as_text(
    live_stack, browser, xss_tenant, csp
):
    document_id = live_stack.sql(
        "SELECT d.id FROM knowledge_document d JOIN supportbot_tenant t ON t.id = d.tenant_id "
        "WHERE t.slug = %s",
        (SLUG,),
    )[0][0]
    url = f"{live_stack.url}/kb/{SLUG}/{document_id}/"
    context = payload_context(browser)
    page = watched(context.new_page())
    page.goto(url)
    assert page.title() == f"{DOC_TITLE} · {TENANT_NAME}"
    assert page.locator("h1").inner_text() == DOC_TITLE
    assert TENANT_NAME in page.locator("p.meta").first.inner_text()
    paths = page.locator(".chunk .path").all_inner_texts()
    assert any(HEADING_1 in p for p in paths), paths
    assert any(HEADING_2 in p for p in paths), paths
    shown = page.locator("body").inner_text()
    for payload in PAYLOADS:
        assert payload in shown, payload
    assert_inert(page, page.dialogs)
    enforced(browser, csp, context, url, "h1")
    context.close()
    assert csp.violations == []


def test_widget_shows_payloads_as_text_in_its_frame(live_stack, browser, xss_tenant):
    server, origin = serve_shop(live_stack, tenant=SLUG)
    set_origins = "UPDATE supportbot_tenant SET allowed_origins = %s WHERE slug = %s RETURNING id"
    live_stack.sql(set_origins, ([origin], SLUG))
    context = payload_context(browser)
    try:
        page = watched(context.new_page())
        page.goto(f"{origin}/")
        page.click("#supportbot-launcher")
        frame = page.frame_locator("#supportbot-frame")
        frame.locator("#status:has-text('Online')").wait_for(timeout=20000)
        chat = next(f for f in page.frames if f.url.startswith(f"{live_stack.url}/chat/"))
        ask(chat, QUESTION)
        assert_chat_shows_literally(chat)
        assert_inert(page, page.dialogs)
    finally:
        context.close()
        live_stack.sql(set_origins, ([], SLUG))
        server.shutdown()


def login(page, live_stack, password: str) -> None:
    page.goto(f"{live_stack.url}/console/login/")
    page.fill("input[name=username]", "xss-admin")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url("**/console/")


def test_console_shows_payloads_in_queue_transcript_summary_and_notes_as_text(
    live_stack, browser, xss_tenant, csp
):
    secret = live_stack.sql("SELECT widget_secret FROM supportbot_tenant WHERE slug = %s", (SLUG,))
    token = identity_token_make(tenant=Tenant(widget_secret=secret[0][0]), external_id=EXTERNAL_ID)
    customer_ctx = payload_context(browser)
    customer = watched(customer_ctx.new_page())
    customer.goto(f"{live_stack.url}/chat/{SLUG}/#identity={token}")
    customer.wait_for_selector("#status:has-text('Online')", timeout=20000)
    ask(customer, QUESTION)
    customer.click("#human")
    customer.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)
    handoff_id = live_stack.sql(
        "SELECT max(h.id) FROM handoffs_handoff h JOIN supportbot_tenant t "
        "ON t.id = h.tenant_id WHERE t.slug = %s",
        (SLUG,),
    )[0][0]

    agent_ctx = payload_context(browser)
    agent = watched(agent_ctx.new_page())
    login(agent, live_stack, xss_tenant)
    assert agent.locator("#console-tenant").inner_text() == TENANT_NAME
    item = agent.locator(f'.queue-item[data-id="{handoff_id}"]')
    item.wait_for(timeout=15000)
    assert EXTERNAL_ID in item.inner_text()
    assert QUESTION[:160] in item.inner_text()  # the queue shows its first 160 characters
    assert_inert(agent, agent.dialogs)

    item.click()
    agent.wait_for_selector("#claim", timeout=10000)
    assert agent.locator("#detail h2").inner_text() == f"{EXTERNAL_ID} ✓"  # verified
    transcript = agent.locator("#transcript")
    assert QUESTION in transcript.inner_text()
    cited = transcript.locator(".tmsg.bot ol a").first.inner_text()
    assert cited.startswith(f"{DOC_TITLE} — ")
    summary = agent.locator("#summary")
    agent.wait_for_function(
        "() => /Customer first asked/.test(document.querySelector('#summary').textContent)",
        timeout=30000,
    )
    assert QUESTION[:150] in summary.inner_text()  # the summary quotes the question's start
    assert DOC_TITLE in summary.inner_text()
    assert_inert(agent, agent.dialogs)

    # The agent claims, replies and notes in payloads: the customer and the console show text.
    agent.click("#claim")
    agent.wait_for_selector(".status-line:has-text('claimed by')", timeout=10000)
    reply = f"Agent reply {PAYLOAD_TEXT}"
    agent.fill("#reply-text", reply)
    agent.click("#reply-send")
    note = f"Agent note {PAYLOAD_TEXT}"
    agent.fill("#note-text", note)
    agent.click("#note-add")
    agent.wait_for_selector("#notes p:has-text('Agent note')", timeout=10000)
    assert note in agent.locator("#notes").inner_text()
    assert "xss-admin" in agent.locator("#notes").inner_text()  # notes name the login
    agent.wait_for_selector("#transcript .tmsg.agent", timeout=10000)
    assert reply in agent.locator("#transcript .tmsg.agent").last.inner_text()
    assert_inert(agent, agent.dialogs)

    said = customer.locator("article.msg.agent").last
    said.wait_for(timeout=10000)
    assert said.locator(".body").inner_text() == reply
    assert said.locator(".who").inner_text() == AGENT_NAME
    assert_inert(customer, customer.dialogs)

    # Server-rendered pages that show the tenant's, the customer's and the document's text.
    for path, text in (
        ("/console/audit/", DOC_TITLE),
        ("/console/gaps/", TENANT_NAME),
    ):
        agent.goto(f"{live_stack.url}{path}?tenant={SLUG}")
        assert text in agent.locator("body").inner_text(), path
        assert_inert(agent, agent.dialogs)
    detail = f"{live_stack.url}/console/handoffs/{handoff_id}/?tenant={SLUG}"
    enforced(browser, csp, agent_ctx, detail, "#notes p:has-text('Agent note')")
    agent_ctx.close()
    customer_ctx.close()
    assert csp.violations == []


def test_the_dom_check_sees_an_injected_element(live_stack, browser, xss_tenant):
    """The checks above are not vacuous: markup put into the page as HTML is caught."""
    context = payload_context(browser)
    page = watched(context.new_page())
    page.goto(f"{live_stack.url}/chat/{SLUG}/")
    page.evaluate(
        "(html) => { document.querySelector('#log').insertAdjacentHTML('beforeend', html); }",
        PAYLOADS[0],
    )
    page.wait_for_function("() => window.__xss !== undefined", timeout=5000)
    assert page.dialogs == ["1"]
    found = page.evaluate(INJECTED)
    assert found["xss"] == "1"
    assert set(found["found"]) >= {"IMG[onerror]", "IMG"}
    assert re.search(r"onerror", " ".join(found["found"]))
    context.close()
