"""Every console page in Chromium after one login: the same header, navigation and stylesheet
(templates/console/base.html, static/console/console.css), under the CSP."""

import pytest

pytestmark = pytest.mark.browser

NAV = [
    "Queue",
    "Actions",
    "Knowledge gaps",
    "Audit",
    "Customers",
    "Widget",
    "Policies",
    "API keys",
    "Ops",
]
HEADER = """() => {
  const header = document.querySelector('header');
  return {
    count: document.querySelectorAll('header').length,
    id: header.id,
    product: header.querySelector('.product').textContent.trim(),
    tenant: (header.querySelector('#console-tenant') || {}).textContent || null,
    user: header.querySelector('#console-user').textContent.trim(),
    nav: [...header.querySelectorAll('#console-nav a')].map((a) => a.textContent.trim()),
    logout: !!header.querySelector('form[action="/console/logout/"] button'),
    background: getComputedStyle(header).backgroundColor,
    stylesheets: [...document.querySelectorAll('link[rel=stylesheet]')]
      .map((l) => new URL(l.href).pathname),
  };
}"""


def console_pages(stack) -> list[str]:
    pages = [
        "/console/",
        "/console/actions/",
        "/console/gaps/",
        "/console/audit/",
        "/console/customers/",
        "/console/widget/",
        "/console/policies/",
        "/console/api-keys/",
        "/console/ops/",
    ]
    handoff = stack.sql("SELECT max(id) FROM handoffs_handoff")[0][0]
    pages.append(f"/console/handoffs/{handoff or 1}/")  # a shell: console.js loads the data
    action = stack.sql("SELECT max(id) FROM actions_actionrequest")[0][0]
    if action:
        pages.append(f"/console/actions/{action}/")
    return pages


def test_every_console_page_has_the_same_header_and_navigation(live_stack, browser, csp):
    context = browser.new_context()
    page = csp.watch(context.new_page())
    page.goto(f"{live_stack.url}/console/actions/login/?next=/console/audit/")
    page.wait_for_url("**/console/login/?next=*")  # the old login sends to the one login
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", live_stack.logins()["admin"])
    page.click("button[type=submit]")
    page.wait_for_url("**/console/audit/")

    seen = {}
    for path in console_pages(live_stack):
        response = page.goto(f"{live_stack.url}{path}")
        assert response.status == 200, path
        seen[path] = page.evaluate(HEADER)

    first = seen["/console/"]
    assert first["count"] == 1
    assert first["id"] == "console-header"
    assert first["product"] == "Supportbot"
    assert first["tenant"]
    assert first["user"] == "admin"
    assert first["nav"] == NAV
    assert first["logout"]
    assert first["stylesheets"] == ["/static/console/console.css"]
    for path, header in seen.items():
        assert header == first, path
    context.close()
    assert csp.violations == []
