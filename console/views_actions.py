"""Agent console pages for the action ledger (server-rendered, session login).

Agents and admins of a tenant see its ledger and decide approvals; staff operators may see
every tenant. Views only parse, authorize and call selectors/services.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import escape
from django.views.decorators.http import require_POST

from actions import selectors, services
from actions.messages import customer_text
from actions.models import ActionRequest
from conversations import selectors as conversation_selectors
from supportbot.errors import ApplicationError, PermissionDenied

LOGIN_URL = "/console/login/"  # one login for the whole console


class ConsoleLoginView(LoginView):
    template_name = "actions/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self):
        return reverse("actions:list")


def _tenant(request: HttpRequest):
    tenants = list(selectors.console_tenants(user=request.user))
    if not tenants:
        raise Http404("You are not an agent of any tenant.")
    slug = request.GET.get("tenant")
    if slug:
        for tenant in tenants:
            if tenant.slug == slug:
                return tenant, tenants
        raise Http404("No such tenant.")
    return tenants[0], tenants


def _action(request: HttpRequest, action_id: int) -> ActionRequest:
    action = ActionRequest.objects.select_related("tenant").filter(pk=action_id).first()
    if (
        action is None
        or not selectors.console_tenants(user=request.user).filter(pk=action.tenant_id).exists()
    ):
        raise Http404("No such action.")
    return selectors.action_get(tenant=action.tenant, action_id=action_id)


@login_required(login_url=LOGIN_URL)
def action_list(request: HttpRequest) -> HttpResponse:
    tenant, tenants = _tenant(request)
    state = request.GET.get("state") or None
    if state and state not in ActionRequest.State.values:
        state = None
    return render(
        request,
        "actions/list.html",
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
    action = _action(request, action_id)
    return render(
        request,
        "actions/detail.html",
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
    action = _action(request, action_id)
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
            return HttpResponse(
                f"<p>{escape(exc.detail)}</p>"
                f"<p><a href='{reverse('actions:detail', args=[action.pk])}'>"
                "Back to the action</a></p>",
                status=403,
            )
        except ApplicationError as exc:
            flash.error(request, exc.detail)
        else:
            flash.success(request, f"Recorded: {decision}. The action is now {result.state}.")
    return redirect("actions:detail", action_id=action.pk)
