"""Customers behind a conversation: anonymous visitors and verified customers."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from conversations.models import Customer
from supportbot import encryption
from supportbot.models import Tenant


def customer_get_or_create_visitor(*, tenant: Tenant, visitor_id: str) -> Customer:
    """The anonymous customer behind a (server-signed) visitor id."""
    try:
        with transaction.atomic():
            customer, _ = Customer.objects.get_or_create(tenant=tenant, visitor_id=visitor_id)
    except IntegrityError:
        customer = Customer.objects.get(tenant=tenant, visitor_id=visitor_id)
    return customer


def customer_get_or_create_verified(
    *, tenant: Tenant, external_id: str, name: str = "", email: str = ""
) -> Customer:
    """The verified customer with the tenant's `external_id` (identity checked by the caller)."""
    name, email = (name or "")[:200], (email or "")[:254]
    try:
        with transaction.atomic():
            customer, created = Customer.objects.get_or_create(
                tenant=tenant,
                external_id=external_id,
                defaults={"verified": True, "name": name, "email": email},
            )
    except IntegrityError:
        customer = Customer.objects.get(tenant=tenant, external_id=external_id)
    updates = {}
    if not customer.verified:
        updates["verified"] = True
    if name and customer.name != name:
        updates["name"] = name
    if email and customer.email != email:
        updates["email"] = email
    if updates:
        Customer.objects.filter(pk=customer.pk).update(
            **encryption.seal_fields(Customer, tenant_id=tenant.pk, fields=updates)
        )
        for key, value in updates.items():
            setattr(customer, key, value)
    return customer
