"""The policies page for tenant admins: refund limits, approver roles per risk class, proposal
lifetime, retention and handoff capacity (actions.services.policies: validated, one audit row
with old and new values per save). Staff without a membership read it, never save."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from actions import services as action_services
from console.access import ADMIN, ConsoleAccess, console_page
from supportbot.errors import ApplicationError
from supportbot.models import Membership
from supportbot.services import Actor

ROLE_CHOICES = Membership.Role.choices


class PoliciesForm(forms.Form):
    """The shape of each value; the ranges are the service's rules (its messages show here)."""

    refund_auto_limit = forms.DecimalField(
        max_digits=12, decimal_places=2, help_text="Refunds up to this amount run without a person."
    )
    refund_per_customer_daily_limit = forms.DecimalField(
        max_digits=12,
        decimal_places=2,
        label="Refunds per customer per day",
        help_text="The most one customer is refunded in a day, automatic or approved.",
    )
    approvers_low = forms.MultipleChoiceField(
        choices=ROLE_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label="Who approves low-risk actions",
    )
    approvers_high = forms.MultipleChoiceField(
        choices=ROLE_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        label="Who approves high-risk actions",
    )
    proposal_ttl_seconds = forms.IntegerField(
        label="Proposal lifetime (seconds)",
        help_text="How long a customer can confirm an action card (30 to 86400).",
    )
    retention_days = forms.IntegerField(
        required=False,
        help_text="Erase conversations idle this many days (empty: keep them).",
    )
    handoff_capacity = forms.IntegerField(
        label="Handoff capacity per agent",
        help_text="Open handoffs per online agent before customers are asked to wait.",
    )

    def policies(self) -> action_services.Policies:
        data = self.cleaned_data
        return action_services.Policies(
            refund_auto_limit=data["refund_auto_limit"],
            refund_per_customer_daily_limit=data["refund_per_customer_daily_limit"],
            handoff_capacity=data["handoff_capacity"],
            retention_days=data["retention_days"],
            proposal_ttl_seconds=data["proposal_ttl_seconds"],
            approver_roles={"low": data["approvers_low"], "high": data["approvers_high"]},
        )


def _initial(policies: action_services.Policies) -> dict:
    return {
        "refund_auto_limit": policies.refund_auto_limit,
        "refund_per_customer_daily_limit": policies.refund_per_customer_daily_limit,
        "approvers_low": policies.approver_roles.get("low", []),
        "approvers_high": policies.approver_roles.get("high", []),
        "proposal_ttl_seconds": policies.proposal_ttl_seconds,
        "retention_days": policies.retention_days,
        "handoff_capacity": policies.handoff_capacity,
    }


@require_http_methods(["GET", "POST"])
@console_page(role=ADMIN)
def policies(request: HttpRequest, access: ConsoleAccess) -> HttpResponse:
    """GET shows the tenant's policies; POST saves them (a bad value comes back on the form)."""
    tenant = access.tenant
    if request.method == "POST":
        form = PoliciesForm(request.POST)
        if form.is_valid():
            try:
                changes = action_services.policies_set(
                    tenant=tenant, actor=Actor.for_user(request.user), policies=form.policies()
                )
            except ApplicationError as exc:
                field = {"approver_roles": None}.get(exc.field, exc.field)
                form.add_error(field if field in form.fields else None, exc.detail)
            else:
                if changes:
                    messages.success(request, f"Saved: {', '.join(sorted(changes))}.")
                else:
                    messages.info(request, "Nothing changed.")
                return redirect(reverse("console-policies") + access.query)
        return render(request, "console/policies.html", {"form": form}, status=400)
    form = PoliciesForm(initial=_initial(action_services.policies_get(tenant=tenant)))
    return render(request, "console/policies.html", {"form": form})
