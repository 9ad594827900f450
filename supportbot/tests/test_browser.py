"""Operator and admin pages under the Content-Security-Policy, in Chromium on make run's stack."""

import pytest

pytestmark = pytest.mark.browser
SHOTS = "var/screenshots"


def test_console_ops_actions_admin_and_api_docs_work_without_csp_violations(
    live_stack, browser, csp
):
    context = browser.new_context()
    page = csp.watch(context.new_page())
    page.goto(f"{live_stack.url}/console/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", live_stack.logins()["admin"])
    page.click("button[type=submit]")
    page.wait_for_url("**/console/")
    page.wait_for_selector("#agents:has-text('Online')", timeout=15000)  # console.js ran

    page.goto(f"{live_stack.url}/console/gaps/")
    page.wait_for_selector("h1:has-text('Knowledge gaps')")

    # The actions console: the console's stylesheet applies and the filter submits by itself.
    page.goto(f"{live_stack.url}/console/actions/?tenant=acme")
    page.wait_for_selector("h1:has-text('Actions')")
    header_bg = page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
    assert header_bg == "rgb(22, 57, 45)"
    with page.expect_navigation():
        page.select_option("select[name=state]", "succeeded")
    assert "state=succeeded" in page.url

    # The ops page: ops.js refreshes the snapshot and draws the legend.
    page.goto(f"{live_stack.url}/console/ops/")
    page.wait_for_function(
        "() => !document.getElementById('updated').textContent.startsWith('rendered')",
        timeout=15000,
    )
    page.screenshot(path=f"{SHOTS}/ops-csp.png")
    metrics = page.request.get(f"{live_stack.url}/metrics")
    assert metrics.status == 200  # staff read /metrics with their session

    page.goto(f"{live_stack.url}/admin/supportbot/tenant/")
    page.click("text=acme")
    page.wait_for_selector("input[name=allowed_origins]")
    page.goto(f"{live_stack.url}/admin/auth/user/")
    page.wait_for_selector("#result_list")

    # Swagger UI from the sidecar's static files, its init script from ?script=.
    page.goto(f"{live_stack.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title", timeout=20000)
    assert "Supportbot API" in page.inner_text(".swagger-ui .info .title")
    page.wait_for_selector(".opblock-tag-section", timeout=10000)
    page.screenshot(path=f"{SHOTS}/api-docs.png")
    context.close()
    assert csp.violations == []


def test_metrics_refuse_an_anonymous_scraper(live_stack, browser):
    context = browser.new_context()
    r = context.request.get(f"{live_stack.url}/metrics")
    assert r.status == 401
    assert r.json()["error"]["code"] == "not_authenticated"
    context.close()
