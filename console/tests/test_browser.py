"""Customer and agent in two browser contexts on the make-run stack: a clean, live handoff."""

import json
import re

import pytest

pytestmark = pytest.mark.browser
SHOTS = "var/screenshots"


def bot_replies(stack, conversation_id: int) -> int:
    return stack.sql(
        "SELECT count(*) FROM conversations_message WHERE conversation_id = %s AND role = 'bot'",
        (conversation_id,),
    )[0][0]


def test_customer_asks_for_a_human_agent_claims_replies_and_gives_back(live_stack, browser, csp):
    agent_ctx = browser.new_context()
    agent = csp.watch(agent_ctx.new_page())
    agent.goto(f"{live_stack.url}/console/login/")
    agent.fill("input[name=username]", "agent")
    agent.fill("input[name=password]", live_stack.logins()["agent"])
    agent.click("button[type=submit]")
    agent.wait_for_url("**/console/")
    agent.wait_for_selector("#agents:has-text('Online')", timeout=15000)

    customer_ctx = browser.new_context(viewport={"width": 390, "height": 780})
    customer = csp.watch(customer_ctx.new_page())
    customer.goto(f"{live_stack.url}/chat/acme/")
    customer.wait_for_selector("#status:has-text('Online')", timeout=20000)
    customer.fill("#input", "I want to talk to a human about my broken stove")
    customer.click("#send")
    customer.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)
    conversation_id = live_stack.sql("SELECT max(conversation_id) FROM handoffs_handoff")[0][0]

    # The agent sees it appear live (no reload), opens and claims it.
    item = agent.locator(".queue-item", has_text="broken stove")
    item.wait_for(timeout=15000)
    item.click()
    agent.wait_for_selector("#transcript:has-text('broken stove')")
    agent.click("#claim")
    agent.wait_for_selector(".status-line:has-text('claimed by agent')", timeout=10000)
    customer.wait_for_selector("#status:has-text('Chatting with our team')", timeout=10000)

    agent.fill("#reply-text", "Hi, I'm Sam. Sorry about the stove, let's fix this.")
    agent.click("#reply-send")
    customer.wait_for_selector("article.msg.agent:has-text('Sorry about the stove')", timeout=10000)
    agent.screenshot(path=f"{SHOTS}/console-claimed.png")
    customer.screenshot(path=f"{SHOTS}/chat-agent-reply.png")

    # The bot stays silent while the agent owns the conversation.
    before = bot_replies(live_stack, conversation_id)
    customer.fill("#input", "How long does standard shipping take?")
    customer.click("#send")
    agent.wait_for_selector("#transcript:has-text('standard shipping')", timeout=10000)
    customer.wait_for_timeout(3000)
    assert bot_replies(live_stack, conversation_id) == before
    assert customer.locator("article.msg.bot", has_text="business days").count() == 0

    # Give it back: the bot answers again.
    agent.click("#give-back")
    customer.wait_for_selector("#status:has-text('Online')", timeout=10000)
    customer.fill("#input", "How much does overnight shipping cost?")
    customer.click("#send")
    customer.wait_for_selector("article.msg.bot:has-text('29.95')", timeout=30000)
    assert bot_replies(live_stack, conversation_id) == before + 1
    states = live_stack.sql(
        "SELECT state FROM handoffs_handoff WHERE conversation_id = %s", (conversation_id,)
    )
    assert states == [("returned_to_bot",)]
    agent_ctx.close()
    customer_ctx.close()
    assert csp.violations == []


def test_a_message_that_arrives_while_the_console_reloads_stays_on_the_transcript(
    live_stack, browser, csp
):
    """The console reloads the open handoff on every queue event. A reload fetched before the
    customer's next message was saved, and rendered after that message arrived live, used to
    take it off the agent's transcript (CI saw the agent miss "standard shipping"). The
    reload is held here until the message has arrived."""
    customer_ctx = browser.new_context()
    customer = csp.watch(customer_ctx.new_page())
    customer.goto(f"{live_stack.url}/chat/acme/")
    customer.wait_for_selector("#status:has-text('Online')", timeout=20000)
    customer.click("#human")
    customer.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)
    handoff_id = live_stack.sql("SELECT max(id) FROM handoffs_handoff")[0][0]

    agent_ctx = browser.new_context()
    agent = csp.watch(agent_ctx.new_page())
    agent.goto(f"{live_stack.url}/console/login/")
    agent.fill("input[name=username]", "agent")
    agent.fill("input[name=password]", live_stack.logins()["agent"])
    agent.click("button[type=submit]")
    agent.wait_for_url("**/console/")
    agent.goto(f"{live_stack.url}/console/handoffs/{handoff_id}/")
    agent.wait_for_selector("#claim")
    agent.click("#claim")
    customer.wait_for_selector("#status:has-text('Chatting with our team')", timeout=10000)

    held = []
    reload = re.compile(rf"/console/api/handoffs/{handoff_id}\?")
    agent.route(reload, lambda route: held.append((route, route.fetch())))
    agent.fill("#note-text", "checking the courier")
    agent.click("#note-add")
    for _ in range(100):  # the note's reload is fetched (before the message) and held
        if held:
            break
        agent.wait_for_timeout(50)
    agent.wait_for_timeout(300)  # both reloads (the note's and its event's) are in
    stale = list(held)
    assert stale

    customer.fill("#input", "Any news on the courier for my parcel?")
    customer.click("#send")
    agent.wait_for_selector("#transcript:has-text('courier for my parcel')", timeout=10000)
    for route, response in stale:  # the reloads fetched before the message render after it
        route.fulfill(response=response)
    agent.wait_for_selector("#notes:has-text('checking the courier')", timeout=10000)
    agent.wait_for_timeout(200)
    assert agent.locator("#transcript", has_text="courier for my parcel").count() == 1
    agent.unroute(reload)
    for route, response in held[len(stale) :]:
        route.fulfill(response=response)
    agent_ctx.close()
    customer_ctx.close()
    assert csp.violations == []


def test_an_agent_who_opens_another_handoff_never_sees_the_first_ones_messages_in_it(
    live_stack, browser, csp
):
    """An agent leaves handoff A for B. A's customer writes just then: the server had not yet
    taken the agent off A (its `view` of B is held here), so the message reaches the page while
    B's transcript loads. It used to be kept as a live message and painted into B's transcript
    for good."""
    handoffs = []
    customers = []
    for topic in ("my lost parcel", "my torn tent"):
        ctx = browser.new_context()
        page = csp.watch(ctx.new_page())
        page.goto(f"{live_stack.url}/chat/acme/")
        page.wait_for_selector("#status:has-text('Online')", timeout=20000)
        page.fill("#input", f"I want to talk to a human about {topic}")
        page.click("#send")
        page.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)
        handoffs.append(live_stack.sql("SELECT max(id) FROM handoffs_handoff")[0][0])
        customers.append((ctx, page))
    first, second = handoffs

    agent_ctx = browser.new_context()
    agent = csp.watch(agent_ctx.new_page())
    held_views = []

    def console_socket(ws):
        server = ws.connect_to_server()

        def to_server(message):
            if json.loads(message) == {"type": "view", "handoff_id": second}:
                held_views.append(message)  # the server keeps the agent on the first handoff
            else:
                server.send(message)

        ws.on_message(to_server)

    agent.route_web_socket(re.compile(r"/ws/console/"), console_socket)
    agent.goto(f"{live_stack.url}/console/login/")
    agent.fill("input[name=username]", "agent")
    agent.fill("input[name=password]", live_stack.logins()["agent"])
    agent.click("button[type=submit]")
    agent.wait_for_url("**/console/")
    agent.goto(f"{live_stack.url}/console/handoffs/{first}/")
    agent.wait_for_selector("#claim")
    agent.wait_for_selector(f'.queue-item[data-id="{second}"]', timeout=15000)

    held_details = []
    detail = re.compile(rf"/console/api/handoffs/{second}\?")
    agent.route(detail, lambda route: held_details.append((route, route.fetch())))
    agent.click(f'.queue-item[data-id="{second}"]')
    for _ in range(100):
        if held_views and held_details:
            break
        agent.wait_for_timeout(50)
    assert held_views
    assert held_details

    customers[0][1].fill("#input", "Any news on my parcel from the courier?")
    customers[0][1].click("#send")
    # Still shown: the first handoff's transcript, so the message is painted there ...
    agent.wait_for_selector("#transcript:has-text('news on my parcel')", timeout=10000)
    for route, response in held_details:
        route.fulfill(response=response)
    # ... and the second handoff's transcript, rendered after it, does not take it in.
    agent.wait_for_selector("#transcript:has-text('my torn tent')", timeout=10000)
    agent.wait_for_timeout(300)
    assert agent.locator("#transcript", has_text="news on my parcel").count() == 0
    agent.unroute(detail)
    agent_ctx.close()
    for ctx, _page in customers:
        ctx.close()
    assert csp.violations == []


def test_second_agent_is_told_the_handoff_is_already_claimed(live_stack, browser, csp):
    customer_ctx = browser.new_context()
    customer = csp.watch(customer_ctx.new_page())
    customer.goto(f"{live_stack.url}/chat/acme/")
    customer.wait_for_selector("#status:has-text('Online')", timeout=20000)
    customer.click("#human")
    customer.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)
    handoff_id = live_stack.sql("SELECT max(id) FROM handoffs_handoff")[0][0]

    pages = []
    for username in ("agent", "agent2"):
        ctx = browser.new_context()
        page = csp.watch(ctx.new_page())
        page.goto(f"{live_stack.url}/console/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", live_stack.logins()[username])
        page.click("button[type=submit]")
        page.wait_for_url("**/console/")
        page.goto(f"{live_stack.url}/console/handoffs/{handoff_id}/")
        page.wait_for_selector("#claim")
        pages.append(page)
    pages[0].wait_for_selector(".viewers", timeout=15000)  # who is viewing shows in the queue
    pages[0].click("#claim")
    pages[0].wait_for_selector(".status-line:has-text('claimed by agent')")
    # The other agent's page updates live: claimed by agent, claim disabled.
    pages[1].wait_for_selector(".status-line:has-text('claimed by agent')", timeout=10000)
    assert pages[1].locator("#claim").is_disabled()
    # A claim sent with the version the page loaded first loses with a clear message.
    lost = pages[1].evaluate(
        """async (id) => {
            const csrf = document.querySelector('[name=csrfmiddlewaretoken]').value;
            const r = await fetch(`/console/api/handoffs/${id}/claim`, {method: 'POST',
              headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf},
              body: JSON.stringify({expected_version: 1})});
            return [r.status, (await r.json()).error.detail];
        }""",
        handoff_id,
    )
    assert lost == [409, "Already claimed by agent."]
    owners = live_stack.sql(
        "SELECT u.username FROM handoffs_handoff h JOIN auth_user u ON u.id = h.assigned_to_id "
        "WHERE h.id = %s",
        (handoff_id,),
    )
    assert owners == [("agent",)]
    customer_ctx.close()
    assert csp.violations == []


def test_no_handoff_is_lost_across_a_restart_of_the_web_process(live_stack, browser, csp):
    customer_ctx = browser.new_context()
    customer = csp.watch(customer_ctx.new_page())
    customer.goto(f"{live_stack.url}/chat/acme/")
    customer.wait_for_selector("#status:has-text('Online')", timeout=20000)
    customer.fill("#input", "please connect me to a person about my restart-test order")
    customer.click("#send")
    customer.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)

    agent_ctx = browser.new_context()
    agent = csp.watch(agent_ctx.new_page())
    agent.goto(f"{live_stack.url}/console/login/")
    agent.fill("input[name=username]", "agent")
    agent.fill("input[name=password]", live_stack.logins()["agent"])
    agent.click("button[type=submit]")
    agent.wait_for_selector(".queue-item:has-text('restart-test')", timeout=15000)

    live_stack.restart()  # daphne, qcluster and the order service all stop and start again

    agent.reload()
    agent.wait_for_selector(".queue-item:has-text('restart-test')", timeout=30000)
    # The customer's page reconnects by itself and still sees its place in the queue.
    customer.wait_for_selector("#status:has-text('Online')", timeout=30000)
    customer.reload()
    customer.wait_for_selector("#notice:has-text('person from our team')", timeout=30000)
    assert customer.locator("article.msg.customer", has_text="restart-test").count() == 1
    agent_ctx.close()
    customer_ctx.close()
    assert csp.violations == []
