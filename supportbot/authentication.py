"""DRF authentication for partner API keys and resolution of the request's tenant."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import authentication, exceptions

from supportbot import selectors
from supportbot.errors import ApplicationError, PermissionDenied
from supportbot.models import ApiKey, Tenant
from supportbot.services import Actor, InvalidApiKey, api_key_authenticate

TENANT_HEADER = "HTTP_X_SUPPORTBOT_TENANT"


@dataclass
class ApiKeyPrincipal:
    """`request.user` for a partner key: authenticated, bound to one tenant, not a person."""

    api_key: ApiKey

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    is_anonymous = False

    @property
    def tenant(self) -> Tenant:
        return self.api_key.tenant

    @property
    def pk(self) -> None:  # never a Django user
        return None

    def get_username(self) -> str:
        return f"key:{self.api_key.prefix}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer sb_<prefix>_<secret>`; a bad key is a 401, never a fallthrough."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION")
        if not header:
            return None
        # Only printable ASCII is a credential; anything else (a no-break space, other
        # non-ASCII, control characters, only whitespace) is malformed, never a 500.
        if not isinstance(header, str) or not header.isascii() or not header.strip():
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed(
                "Unsupported authorization scheme: use 'Bearer <api key>'."
            )
        if len(parts) != 2 or not parts[1].isprintable():
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        try:
            key = api_key_authenticate(raw_key=parts[1])
        except InvalidApiKey as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from exc
        return ApiKeyPrincipal(api_key=key), key

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'


def request_tenant(request) -> Tenant:
    """The tenant the request acts for: the key's tenant, or the session user's membership.

    A console user with several memberships names one in the `X-Supportbot-Tenant` header;
    naming a tenant the user is not a member of is a 403.
    """
    if isinstance(request.auth, ApiKey):
        return request.auth.tenant
    user = request.user
    slug = request.META.get(TENANT_HEADER) or request.GET.get("tenant")
    memberships = list(selectors.membership_list_for_user(user=user))
    if slug:
        for membership in memberships:
            if membership.tenant.slug == slug:
                return membership.tenant
        if user.is_staff:
            return selectors.tenant_get(slug=slug)
        raise PermissionDenied(f"You are not a member of tenant {slug!r}.")
    if len(memberships) == 1:
        return memberships[0].tenant
    if not memberships:
        raise PermissionDenied("You are not a member of any tenant.")
    raise ApplicationError(
        "You belong to several tenants: name one in the X-Supportbot-Tenant header.",
        code="tenant_required",
    )


def request_actor(request) -> Actor:
    if isinstance(request.auth, ApiKey):
        return Actor.for_api_key(request.auth)
    return Actor.for_user(request.user)
