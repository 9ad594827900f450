"""Who may see and do what in the console: one rule over the tenancy core's memberships.

The console works for one tenant per request, named by `?tenant=<slug>` (or the
`X-Supportbot-Tenant` header of the JSON API); without one it is the user's first active
membership (by slug). Then:

- a member may read and act with their role: `agent` for the queue and the ledger, `admin`
  for knowledge gaps, the audit trail, customer data and the widget;
- staff without a membership of the tenant may READ every page and JSON feed of any active
  tenant but never act (writes are refused with a message saying so), and never see a
  credential (the widget secret) — reading it would let them act as the tenant;
- staff-only pages (ops) are for active staff, whatever their memberships;
- anyone else, and every inactive tenant, is refused.

`console_access_check` is the rule; `ConsolePermission` applies it to DRF views and
`console_page` to page views. docs/console.md states the same policy for people.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest
from django.shortcuts import render
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.views import APIView

from supportbot import selectors
from supportbot.authentication import TENANT_HEADER
from supportbot.errors import PermissionDenied
from supportbot.models import Membership, Tenant

LOGIN_URL = "/console/login/"
AGENT = Membership.Role.AGENT
ADMIN = Membership.Role.ADMIN

STAFF_READ_ONLY = (
    "Staff without a membership of {slug} have read-only access: ask a tenant admin for a "
    "membership to act (claim, reply, note, close, decide, publish, export, erase, rotate)."
)


class ConsoleDenied(PermissionDenied):
    """The console refuses this request; `detail` says why (never another tenant's data)."""


@dataclass(frozen=True)
class ConsoleAccess:
    """The tenant a console request works for and the user's membership of it (None: staff
    watching read-only, or a staff-only page without a tenant)."""

    tenant: Tenant | None
    membership: Membership | None

    @property
    def read_only(self) -> bool:
        return self.tenant is not None and self.membership is None

    @property
    def query(self) -> str:
        """`?tenant=<slug>` for links that stay on this tenant."""
        return f"?tenant={self.tenant.slug}" if self.tenant else ""


def console_access_resolve(*, user, slug: str | None) -> ConsoleAccess:
    """The tenant named by `slug` (else the user's first active membership) and the user's
    membership of it. A tenant the user may not see at all resolves to no tenant; staff naming
    an active tenant they are no member of get it without a membership."""
    if not _signed_in(user):
        return ConsoleAccess(None, None)
    memberships = selectors.membership_list_for_user(user=user).order_by("tenant__slug")
    if not slug:
        first = memberships.first()
        return ConsoleAccess(first.tenant if first else None, first)
    membership = memberships.filter(tenant__slug=slug).first()
    if membership is not None:
        return ConsoleAccess(membership.tenant, membership)
    if user.is_staff:
        return ConsoleAccess(Tenant.objects.filter(slug=slug, is_active=True).first(), None)
    return ConsoleAccess(None, None)


def console_access_for_tenant(*, user, tenant: Tenant) -> ConsoleAccess:
    """Access to a tenant named by an object (an action's tenant), not by the request."""
    if not _signed_in(user) or not tenant.is_active:
        return ConsoleAccess(None, None)
    membership = selectors.membership_get(user=user, tenant=tenant)
    if membership is None and not user.is_staff:
        return ConsoleAccess(None, None)
    return ConsoleAccess(tenant, membership)


def request_slug(request: HttpRequest) -> str | None:
    return request.META.get(TENANT_HEADER) or request.GET.get("tenant") or None


def console_access_check(
    access: ConsoleAccess,
    *,
    user,
    role: str = AGENT,
    write: bool = False,
    staff_read: bool = True,
    slug: str | None = None,
) -> None:
    """Raise ConsoleDenied unless `user` may read (or, `write`, act) with `role` in
    `access.tenant`; `staff_read=False` marks credentials that staff never read."""
    if access.tenant is None:
        if slug:
            raise ConsoleDenied(f"You are not a member of tenant {slug!r}.")
        raise ConsoleDenied("You are not a member of any tenant.")
    membership = access.membership
    if membership is None:
        if not user.is_staff:
            raise ConsoleDenied(f"You are not a member of tenant {access.tenant.slug!r}.")
        if write:
            raise ConsoleDenied(STAFF_READ_ONLY.format(slug=access.tenant.slug))
        if not staff_read:
            raise ConsoleDenied(f"Only admins of {access.tenant.slug} see this, not staff.")
        return
    if role == ADMIN and membership.role != ADMIN:
        raise ConsoleDenied(f"Only admins of {access.tenant.slug} may open this.")


def _signed_in(user) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def staff_check(user) -> None:
    if not (_signed_in(user) and user.is_staff):
        raise ConsoleDenied("Staff only.")


class ConsolePermission(BasePermission):
    """The console rule for a DRF view. The view declares `console_role` (agent or admin),
    `console_staff_read` (False for credentials) and `console_staff_only`; unsafe methods are
    writes. On success `request.console` holds the ConsoleAccess."""

    def has_permission(self, request, view) -> bool:
        if getattr(view, "console_staff_only", False):
            staff_check(request.user)
            request.console = ConsoleAccess(None, None)
            return True
        if not _signed_in(request.user):
            return False  # DRF answers 403 "Authentication credentials were not provided."
        slug = request_slug(request)
        access = console_access_resolve(user=request.user, slug=slug)
        console_access_check(
            access,
            user=request.user,
            role=getattr(view, "console_role", AGENT),
            write=request.method not in SAFE_METHODS,
            staff_read=getattr(view, "console_staff_read", True),
            slug=slug,
        )
        request.console = access
        return True


class ConsoleApiView(APIView):
    """A console JSON endpoint: session login, `ConsolePermission`, and `self.tenant` /
    `self.membership` set before the handler runs."""

    authentication_classes = [SessionAuthentication]
    permission_classes = [ConsolePermission]
    console_role = AGENT
    console_staff_read = True
    console_staff_only = False

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.tenant = request.console.tenant
        self.membership = request.console.membership


def denied_page(request: HttpRequest, detail: str):
    """The console's 403 page: the reason, and for staff the tenants they may watch."""
    tenants = []
    if request.user.is_authenticated and request.user.is_staff:
        tenants = list(Tenant.objects.filter(is_active=True).order_by("slug")[:200])
    return render(
        request,
        "console/denied.html",
        {"detail": detail, "watchable": tenants},
        status=403,
    )


def console_page(
    *,
    role: str = AGENT,
    write: bool | None = None,
    staff_read: bool = True,
    staff_only: bool = False,
):
    """Guard a console page view with the console rule; the view gets `access` after
    `request`. `write=None` counts POST as a write; refusals render the 403 message page."""

    def decorate(view):
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            slug = request.GET.get("tenant") or None
            access = console_access_resolve(user=request.user, slug=slug)
            try:
                if staff_only:
                    staff_check(request.user)
                else:
                    is_write = request.method not in SAFE_METHODS if write is None else write
                    console_access_check(
                        access,
                        user=request.user,
                        role=role,
                        write=is_write,
                        staff_read=staff_read,
                        slug=slug,
                    )
            except ConsoleDenied as exc:
                return denied_page(request, exc.detail)
            request.console = access
            return view(request, access, *args, **kwargs)

        return login_required(wrapped, login_url=LOGIN_URL)

    return decorate


def console_context(request: HttpRequest) -> dict:
    """Template context for the console layout: the request's ConsoleAccess, if any."""
    return {"console": getattr(request, "console", None)}
