"""Agent console pages for the action ledger (server-rendered, session login).

Agents and admins of a tenant see its ledger and decide approvals; staff operators may see
every active tenant's ledger and decide nothing (console/access.py). Views only parse,
authorize and call selectors/services.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from actions import selectors, services
from actions.messages import customer_text
from actions.models import ActionRequest
from console.access import (
    LOGIN_URL,
    ConsoleAccess,
    ConsoleDenied,
    console_access_check,
    console_access_for_tenant,
    console_page,
    denied_page,
)
from conversations import selectors as conversation_selectors
from supportbot.errors import ApplicationError, PermissionDenied
from supportbot.models import Tenant
from supportbot.selectors import membership_list_for_user


def _tenants(user) -> list[Tenant]:
    """The tenants the tenant switcher offers: the user's own; staff see every active one."""
    if user.is_staff:
        return list(Tenant.objects.filter(is_active=True).order_by("slug"))
    return [m.tenant for m in membership_list_for_user(user=user).order_by("tenant__slug")]


def _action(request: HttpRequest, action_id: int, *, write: bool) -> ActionRequest:
    """The action, in its own tenant, if the console rule lets the user see it (else 404:
    another tenant's ids are not confirmed); a refused write raises ConsoleDenied."""
    action = ActionRequest.objects.select_related("tenant").filter(pk=action_id).first()
    access = (
        console_access_for_tenant(user=request.user, tenant=action.tenant)
        if action is not None
        else ConsoleAccess(None, None)
    )
    if access.tenant is None:
        raise Http404("No such action.")
    console_access_check(access, user=request.user, write=write)
    request.console = access
    return selectors.action_get(tenant=action.tenant, action_id=action_id)


def _to_login(request: HttpRequest) -> HttpResponse:
    """302 to the one login, keeping the query string (`next`)."""
    query = request.GET.urlencode()
    return HttpResponseRedirect(LOGIN_URL + (f"?{query}" if query else ""))


def old_login(request: HttpRequest) -> HttpResponse:
    """The former actions login: the console's one login, same `next`."""
    return _to_login(request)


@require_http_methods(["GET", "POST"])
def old_logout(request: HttpRequest) -> HttpResponse:
    """The former actions logout: a POST (CSRF-checked) logs out; then the one login."""
    if request.method == "POST":
        logout(request)
    return _to_login(request)


@console_page()
def action_list(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    tenant, tenants = access.tenant, _tenants(request.user)
    state = request.GET.get("state") or None
    if state and state not in ActionRequest.State.values:
        state = None
    return render(
        request,
        "console/actions_list.html",
        {
            "tenant": tenant,
            "tenants": tenants,
            "state": state,
            "states": ActionRequest.State.values,
            "pending": selectors.pending_approvals(tenant=tenant),
            "actions": selectors.action_list(tenant=tenant, state=state),
            "rejections": selectors.proposal_rejections(tenant=tenant, limit=20),
        },
    )


@login_required(login_url=LOGIN_URL)
def action_detail(request: HttpRequest, action_id: int) -> HttpResponse:
    try:
        action = _action(request, action_id, write=False)
    except ConsoleDenied as exc:
        return denied_page(request, exc.detail)
    return render(
        request,
        "console/action_detail.html",
        {
            "action": action,
            "tenant": action.tenant,
            "customer_text": customer_text(action),
            "trail": selectors.action_audit_trail(action=action),
            "transcript": list(
                conversation_selectors.message_list(
                    tenant=action.tenant, conversation_id=action.conversation_id
                )
            )[-20:],
            "related": selectors.actions_for_conversation(
                tenant=action.tenant, conversation_id=action.conversation_id
            ),
            "can_decide": action.state == ActionRequest.State.AWAITING_APPROVAL
            and selectors.can_decide(user=request.user, tenant=action.tenant, action=action),
        },
    )


@require_POST
@login_required(login_url=LOGIN_URL)
def action_decide(request: HttpRequest, action_id: int) -> HttpResponse:
    try:
        action = _action(request, action_id, write=True)
    except ConsoleDenied as exc:
        return denied_page(request, exc.detail)
    decision = request.POST.get("decision")
    try:
        expected_version = int(request.POST.get("expected_version", ""))
    except ValueError:
        expected_version = -1
    if decision not in ("approve", "deny"):
        flash.error(request, "Choose approve or deny.")
    else:
        try:
            result = services.action_decide(
                action_id=action.pk,
                agent=request.user,
                approve=decision == "approve",
                reason=request.POST.get("reason", ""),
                expected_version=expected_version,
            )
        except PermissionDenied as exc:
            # Audited by the service; a clear 403, never a silent redirect.
            return denied_page(request, exc.detail)
        except ApplicationError as exc:
            flash.error(request, exc.detail)
        else:
            flash.success(request, f"Recorded: {decision}. The action is now {result.state}.")
    return redirect("actions:detail", action_id=action.pk)
