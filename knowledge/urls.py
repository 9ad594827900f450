"""URL routes of the knowledge app (included by config/urls.py)."""

from django.urls import path

from knowledge import api, views

api_v1 = [
    path("knowledge-documents", api.DocumentCollectionApi.as_view(), name="knowledge-documents"),
    path(
        "knowledge-documents/<int:document_id>",
        api.DocumentDetailApi.as_view(),
        name="knowledge-document",
    ),
    path(
        "knowledge-documents/<int:document_id>/versions",
        api.DocumentVersionCreateApi.as_view(),
        name="knowledge-document-versions",
    ),
    path("search", api.SearchApi.as_view(), name="knowledge-search"),
]

pages = [
    path("kb/<slug:tenant_slug>/<int:document_id>/", views.document_page, name="knowledge-page"),
    path(
        "kb/<slug:tenant_slug>/<int:document_id>/v<int:version>/",
        views.document_page,
        name="knowledge-page-version",
    ),
]
