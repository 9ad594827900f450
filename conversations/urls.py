"""URLs of conversation state: the partner API for a customer's data rights."""

from django.urls import path, register_converter

from conversations import api_customers


class ExternalIdConverter:
    """Any external id the API accepts at creation: '/', spaces, newlines and unicode
    included. Clients percent-encode it (`quote(id, safe="")`); Django decodes the path once,
    so `a%2Fb` and `a/b` name the same id, and `%252F` the id `%2F`."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value  # reverse() percent-encodes the result itself


register_converter(ExternalIdConverter, "external_id")

# The export route comes first: a GET of `…/x/export` exports `x`. The erase route takes
# the rest, and a DELETE of `…/x/export` (which resolves to the export route) erases the
# customer `x/export`: each method reads the path one way only.
api_urlpatterns = [
    path(
        "customers/<external_id:external_id>/export",
        api_customers.CustomerExportApi.as_view(),
        name="customer-export",
    ),
    path(
        "customers/<external_id:external_id>",
        api_customers.CustomerEraseApi.as_view(),
        name="customer",
    ),
]
