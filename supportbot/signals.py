"""Receivers of Django's authentication signals: every console login attempt is audited."""

from __future__ import annotations

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from supportbot.client_address import request_client_address
from supportbot.services import login_record


def _ip(request) -> str:
    return request_client_address(request) if request is not None else ""


@receiver(user_logged_in, dispatch_uid="supportbot-login-succeeded")
def _login_succeeded(sender, request, user, **kwargs) -> None:
    login_record(username=user.get_username(), user=user, succeeded=True, ip=_ip(request))


@receiver(user_login_failed, dispatch_uid="supportbot-login-failed")
def _login_failed(sender, credentials, request=None, **kwargs) -> None:
    login_record(username=str(credentials.get("username", "")), succeeded=False, ip=_ip(request))
