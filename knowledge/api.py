"""Partner/console API of the knowledge app: documents (upload, status, replace, delete), search."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from knowledge import selectors, services
from knowledge.models import Document
from knowledge.selectors import Audience
from supportbot.api import AUTH_ERRORS, BAD_CURSOR, ErrorSerializer
from supportbot.authentication import request_actor, request_tenant
from supportbot.errors import PermissionDenied
from supportbot.idempotency import IdempotentPostMixin
from supportbot.models import ApiKey, Membership
from supportbot.pagination import CreatedCursorPagination
from supportbot.selectors import membership_get
from supportbot.throttling import request_limit_enforce


def _require_manager(request, tenant) -> None:
    """Partner keys, staff and tenant admins manage documents; agents only read them."""
    if isinstance(request.auth, ApiKey) or request.user.is_staff:
        return
    membership = membership_get(user=request.user, tenant=tenant)
    if membership is None or membership.role != Membership.Role.ADMIN:
        raise PermissionDenied("Only tenant admins can change knowledge documents.")


def _require_search_scope(key: ApiKey, *, agent: bool, segments: list[str]) -> None:
    """A partner key searches only what it was granted: agents-only documents if
    `may_search_agent_documents`, customer segments among its `search_segments`."""
    if agent and not key.may_search_agent_documents:
        raise PermissionDenied(
            "This API key may not search agents-only documents.", field="audience"
        )
    refused = sorted(set(segments) - set(key.search_segments))
    if refused:
        raise PermissionDenied(
            f"This API key may not search the segments {', '.join(refused)}.", field="segments"
        )


def _request_user(request):
    return None if isinstance(request.auth, ApiKey) else request.user


class DocumentOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    audience = serializers.ChoiceField(choices=Document.Audience.choices)
    segments = serializers.ListField(child=serializers.CharField())
    version = serializers.IntegerField(help_text="Newest uploaded version.")
    live_version = serializers.IntegerField(
        allow_null=True, help_text="Version that search uses (null until the first is ready)."
    )
    status = serializers.ChoiceField(choices=Document.Status.choices)
    error = serializers.CharField(allow_blank=True)
    chunks_done = serializers.IntegerField()
    chunks_total = serializers.IntegerField()
    progress_percent = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="No such document here.")}
UPLOAD_ERRORS = {
    400: OpenApiResponse(
        ErrorSerializer,
        description="Unsupported type (`unsupported_type`), empty file (`empty_file`), "
        "broken gzip (`invalid_gzip`) or invalid field.",
    ),
    413: OpenApiResponse(
        ErrorSerializer, description="File (or a gzip file inflated) larger than the upload limit."
    ),
}


class DocumentCollectionApi(IdempotentPostMixin, APIView):
    """POST uploads a document; GET lists the tenant's documents."""

    parser_classes = [MultiPartParser, FormParser]
    pagination_class = CreatedCursorPagination  # the schema documents the page envelope

    class UploadInputSerializer(serializers.Serializer):
        file = serializers.FileField(allow_empty_file=True)
        title = serializers.CharField(required=False, allow_blank=True, max_length=300)
        audience = serializers.ChoiceField(
            choices=Document.Audience.choices, default=Document.Audience.PUBLIC
        )
        segments = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="Comma-separated customer segments (audience 'segments' only).",
        )

    @extend_schema(
        operation_id="knowledge_documents_create",
        summary="Upload a knowledge document (indexed in the background)",
        request={"multipart/form-data": UploadInputSerializer},
        responses={202: DocumentOutputSerializer, **UPLOAD_ERRORS, **AUTH_ERRORS},
    )
    def post(self, request):
        tenant = request_tenant(request)
        _require_manager(request, tenant)
        request_limit_enforce(request, name="upload_key")
        data = _validated(self.UploadInputSerializer, request.data)
        upload = data["file"]
        document = services.document_upload(
            tenant=tenant,
            file=upload,
            declared_type=upload.content_type or "",
            title=data.get("title", ""),
            audience=data["audience"],
            segments=(data.get("segments") or "").split(","),
            actor=request_actor(request),
            user=_request_user(request),
        )
        body = DocumentOutputSerializer(document).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        operation_id="knowledge_documents_list",
        summary="The tenant's knowledge documents, newest first",
        responses={200: DocumentOutputSerializer(many=True), **BAD_CURSOR, **AUTH_ERRORS},
    )
    def get(self, request):
        tenant = request_tenant(request)
        paginator = CreatedCursorPagination()
        page = paginator.paginate_queryset(
            selectors.document_list(tenant=tenant), request, view=self
        )
        return paginator.get_paginated_response(DocumentOutputSerializer(page, many=True).data)


class DocumentDetailApi(APIView):
    """GET reads a document's status; DELETE removes it with its chunks (audited)."""

    @extend_schema(
        operation_id="knowledge_documents_retrieve",
        summary="A document's indexing status and progress",
        responses={200: DocumentOutputSerializer, **NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, document_id: int):
        tenant = request_tenant(request)
        document = selectors.document_get(tenant=tenant, document_id=document_id)
        return Response(DocumentOutputSerializer(document).data)

    @extend_schema(
        operation_id="knowledge_documents_destroy",
        summary="Delete a document, its files and its chunks",
        responses={204: None, **NOT_FOUND, **AUTH_ERRORS},
    )
    def delete(self, request, document_id: int):
        tenant = request_tenant(request)
        _require_manager(request, tenant)
        services.document_delete(
            tenant=tenant, document_id=document_id, actor=request_actor(request)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class DocumentVersionCreateApi(IdempotentPostMixin, APIView):
    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(allow_empty_file=True)

    @extend_schema(
        operation_id="knowledge_documents_versions_create",
        summary="Replace a document's file (a new version unless the bytes are unchanged)",
        request={"multipart/form-data": InputSerializer},
        responses={202: DocumentOutputSerializer, **UPLOAD_ERRORS, **NOT_FOUND, **AUTH_ERRORS},
    )
    def post(self, request, document_id: int):
        tenant = request_tenant(request)
        _require_manager(request, tenant)
        request_limit_enforce(request, name="upload_key")
        upload = _validated(self.InputSerializer, request.data)["file"]
        document, _ = services.document_replace_file(
            tenant=tenant,
            document_id=document_id,
            file=upload,
            declared_type=upload.content_type or "",
            actor=request_actor(request),
            user=_request_user(request),
        )
        return Response(DocumentOutputSerializer(document).data, status=status.HTTP_202_ACCEPTED)


class SearchApi(APIView):
    class InputSerializer(serializers.Serializer):
        q = serializers.CharField(max_length=selectors.MAX_QUERY_CHARS)
        limit = serializers.IntegerField(min_value=1, max_value=50, default=8)
        audience = serializers.ChoiceField(choices=["customer", "agent"], required=False)
        segments = serializers.CharField(required=False, allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        class PassageSerializer(serializers.Serializer):
            chunk_id = serializers.IntegerField()
            document_id = serializers.IntegerField()
            document_version = serializers.IntegerField()
            title = serializers.CharField()
            heading_path = serializers.ListField(child=serializers.CharField())
            span = serializers.ListField(child=serializers.IntegerField(), min_length=2)
            text = serializers.CharField()
            score = serializers.FloatField()
            evidence = serializers.FloatField()
            url = serializers.CharField(allow_blank=True)

        query = serializers.CharField()
        strength = serializers.ChoiceField(
            choices=["strong", "weak", "none"],
            help_text="How well the best passages answer q, judged on the eight best whatever "
            "the limit; the chat answers only on strong and hedges on weak.",
        )
        ambiguous = serializers.BooleanField(
            help_text="Weak only because no passage stands out: the pages touch the topic "
            "but the search cannot tell which one answers."
        )
        passages = PassageSerializer(
            many=True,
            help_text="At most `limit` passages, best first. A passage that repeats a better one "
            "(another document's copy of the same section) is left out, so fewer may come back.",
        )
        timings_ms = serializers.DictField(child=serializers.FloatField())

    @extend_schema(
        operation_id="knowledge_search",
        summary="Hybrid search over the tenant's knowledge, with citations",
        parameters=[
            OpenApiParameter("q", OpenApiTypes.STR, required=True),
            OpenApiParameter("limit", OpenApiTypes.INT),
            OpenApiParameter(
                "audience",
                OpenApiTypes.STR,
                enum=["customer", "agent"],
                description="Search as a customer (public + segment documents) or an agent "
                "(everything). Default: agent for console users, customer for API keys.",
            ),
            OpenApiParameter(
                "segments", OpenApiTypes.STR, description="Comma-separated customer segments."
            ),
        ],
        responses={200: OutputSerializer, 400: OpenApiResponse(ErrorSerializer), **AUTH_ERRORS},
    )
    def get(self, request):
        tenant = request_tenant(request)
        request_limit_enforce(request, name="search_key")
        data = _validated(self.InputSerializer, request.query_params)
        key = request.auth if isinstance(request.auth, ApiKey) else None
        wanted = data.get("audience", "customer" if key else "agent")
        segments = [s.strip().lower() for s in (data.get("segments") or "").split(",") if s.strip()]
        if key is not None:
            _require_search_scope(key, agent=wanted == "agent", segments=segments)
        audience = Audience.agent() if wanted == "agent" else Audience.customer(segments)
        result = selectors.search_passages(
            tenant=tenant, query=data["q"], audience=audience, limit=data["limit"]
        )
        return Response(self.OutputSerializer(result).data)


def _validated(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
