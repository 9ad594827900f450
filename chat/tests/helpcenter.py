"""A small help center indexed through the real knowledge pipeline, for conversation tests."""

from django.core.files.base import ContentFile

from knowledge.services import document_index, document_upload
from supportbot.services import Actor

RETURNS_MD = """# Returns and refunds

## Return window
You can return unopened items within 30 days of delivery for a full refund to the original
payment method. Opened items can be returned within 30 days for store credit only. Items marked
final sale cannot be returned.

## Refund timing
Once we receive your return, refunds are issued within 5-10 business days to the original
payment method. Store credit is added to your account within 2 business days.
"""

SHIPPING_MD = """# Shipping

## Delivery times
Standard shipping takes 3-5 business days. Express shipping takes 1-2 business days and costs
$15. Orders over $50 ship free within the contiguous United States.

## International shipping
We ship to Canada and the United Kingdom. International orders take 7-14 business days and
customs fees are paid by the customer on delivery.
"""

WARRANTY_MD = """# Warranty

## Coverage
All Acme tents and backpacks carry a 2-year warranty against manufacturing defects. The
warranty does not cover normal wear, misuse or accidental damage.

## Making a claim
To make a warranty claim, email photos of the defect and your order number to
warranty@acme.example. We answer claims within 3 business days.
"""

SECRET_MD = """# Internal escalation playbook

## Goodwill credits
Agents may grant a goodwill credit of up to $25 without approval when a delivery is late.
"""


def index_document(tenant, title, text, audience="public", segments=(), ext="md"):
    document = document_upload(
        tenant=tenant,
        file=ContentFile(text.encode(), name=f"{title.lower().replace(' ', '-')}.{ext}"),
        title=title,
        audience=audience,
        segments=segments,
        actor=Actor.system("test"),
    )
    document_index(document_id=document.pk, version=document.version)
    document.refresh_from_db()
    assert document.status == "ready", document.error
    return document
