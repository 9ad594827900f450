"""`Idempotency-Key` for every partner POST, with Stripe's semantics.

- Keys belong to the API key that sent them (two keys of one tenant never share one, nor
  see each other's saved responses); a caller without an API key is scoped by tenant.
- Same key + same request (method, path, query string, body) → the saved status and body,
  with `Idempotent-Replayed: true`; nothing runs again.
- Same key + a different request → 422 `idempotency_key_reused`.
- Same key while the first request still runs → 409 `idempotency_in_progress` with
  `Retry-After` (a request whose process died holding the key is taken over after a while).
- Successes and client errors (4xx other than 409/429) are saved; 5xx and throttling are not
  (the key is released, so a retry runs again). Keys are kept for 24 hours.
- Every other way out releases the key at once: an uncaught exception in the view, an
  exception while saving.
- A streamed (SSE) response holds the key `in_progress` until its stream ends — to the last
  event, on an error, or when the client disconnects (the answer is still saved) — and then
  releases it: a retry runs again, safe because messages dedupe on `client_message_id` (the
  saved answer comes back).
- A view names the conversation it acts on (`saved_response_attach`) while it runs, so a
  customer's erasure deletes exactly their saved responses (`idempotency_forget`), by index,
  without opening anyone else's — and a response finished after the erasure is not saved.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.http import StreamingHttpResponse
from django.utils import timezone
from rest_framework.response import Response

from supportbot import encryption
from supportbot.authentication import request_tenant
from supportbot.db_connections import connections_release
from supportbot.errors import ApplicationError, Conflict
from supportbot.models import ApiKey, IdempotencyKey, Tenant

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = 255
KEEP = timedelta(hours=24)
ABANDONED_AFTER = timedelta(minutes=2)


class Replay(Exception):
    """Raised from a view's `initial` to answer with the saved response."""

    def __init__(self, record: IdempotencyKey) -> None:
        super().__init__(record.key)
        self.record = record


def request_fingerprint(request) -> str:
    """sha256 over method, path, query parameters (in any order) and the parsed body (uploaded
    files by their content)."""
    data: Any = {}
    try:
        raw = request.data
    except Exception:  # noqa: BLE001 - the view reports the parse error itself
        raw = {}
    if hasattr(raw, "lists"):
        for name, values in raw.lists():
            data[name] = [v if isinstance(v, str) else "" for v in values]
    elif isinstance(raw, dict | list):
        data = raw
    files = {}
    for name, upload in getattr(request, "FILES", {}).items():
        digest = hashlib.sha256()
        for chunk in upload.chunks():
            digest.update(chunk)
        upload.seek(0)
        files[name] = [upload.name, digest.hexdigest()]
    query = sorted((name, sorted(values)) for name, values in request.GET.lists())
    canonical = json.dumps(
        {
            "method": request.method,
            "path": request.path,
            "query": query,
            "data": data,
            "files": files,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def idempotency_begin(
    *, tenant: Tenant, api_key: ApiKey | None, key: str, request
) -> IdempotencyKey:
    """Claim `key` of `api_key` (of `tenant` when None) for this request, or raise Replay /
    422 / 409 as the semantics say."""
    if not key or len(key) > MAX_KEY_CHARS or not key.isprintable():
        raise ApplicationError(
            f"{HEADER} must be 1-{MAX_KEY_CHARS} printable characters.", field=HEADER
        )
    fingerprint = request_fingerprint(request)
    now = timezone.now()
    IdempotencyKey.objects.filter(tenant=tenant, created_at__lt=now - KEEP).delete()
    mine = IdempotencyKey.objects.filter(tenant=tenant, api_key=api_key)  # None: IS NULL
    for _ in range(2):
        try:
            with transaction.atomic():
                return IdempotencyKey.objects.create(
                    tenant=tenant,
                    api_key=api_key,
                    key=key,
                    method=request.method,
                    path=request.path[:300],
                    request_hash=fingerprint,
                )
        except IntegrityError:
            pass
        record = mine.filter(key=key).first()
        if record is None:
            continue  # released meanwhile: claim it
        if record.request_hash != fingerprint:
            raise ApplicationError(
                f"This {HEADER} was used with a different request "
                f"({record.method} {record.path}); use a new key.",
                code="idempotency_key_reused",
                status=422,
                field=HEADER,
            )
        if record.state == IdempotencyKey.State.DONE:
            raise Replay(record)
        if now - record.updated_at < ABANDONED_AFTER:
            raise Conflict(
                f"A request with this {HEADER} is still running; retry shortly.",
                code="idempotency_in_progress",
                extra={"retry_after": 1},
            )
        # The first request died holding the key: take it over (one winner).
        taken = IdempotencyKey.objects.filter(
            pk=record.pk, state=IdempotencyKey.State.IN_PROGRESS, updated_at=record.updated_at
        ).update(updated_at=now)
        if taken:
            record.refresh_from_db()
            return record
    raise Conflict(f"This {HEADER} is busy; retry shortly.", code="idempotency_in_progress")


def saved_response_attach(*, record: IdempotencyKey | None, conversation_id: int) -> None:
    """Link the key this request holds (None: it holds none) to `conversation_id`, now.

    Call it before the work whose response will quote the conversation: the link is written
    at once, so an erasure committing while the request runs deletes the row, and the
    request's final save then finds nothing to write."""
    if record is None:
        return
    record.conversation_id = conversation_id
    IdempotencyKey.objects.filter(pk=record.pk).update(conversation_id=conversation_id)


def idempotency_forget(*, tenant_id: int, conversation_ids: list[int]) -> int:
    """Delete the tenant's saved responses (and held keys) of these conversations; return
    how many. An index lookup: nobody else's response is read or opened."""
    if not conversation_ids:
        return 0
    return IdempotencyKey.objects.filter(
        tenant_id=tenant_id, conversation_id__in=conversation_ids
    ).delete()[0]


def idempotency_release(*, record: IdempotencyKey) -> None:
    """Give the key up (a retry runs again); a no-op once the request's answer is saved."""
    IdempotencyKey.objects.filter(pk=record.pk, state=IdempotencyKey.State.IN_PROGRESS).delete()


def idempotency_finish(*, record: IdempotencyKey, response) -> None:
    """Save what the request answered (or release the key when it must run again)."""
    status = response.status_code
    keep = isinstance(response, Response) and not isinstance(response, StreamingHttpResponse)
    if not keep or status >= 500 or status in (409, 429):
        idempotency_release(record=record)
        return
    IdempotencyKey.objects.filter(pk=record.pk).update(
        **encryption.seal_fields(
            IdempotencyKey,
            tenant_id=record.tenant_id,
            fields={
                "state": IdempotencyKey.State.DONE,
                "status_code": status,
                "response_body": response.data,
                "updated_at": timezone.now(),
            },
        )
    )


def _release_in_thread(record: IdempotencyKey) -> None:
    try:
        idempotency_release(record=record)
    finally:
        connections_release()


def idempotency_hold_while_streaming(*, record: IdempotencyKey, response) -> None:
    """Keep `record` in progress until `response`'s stream ends, then release it.

    The stream ends when its last event is sent, when it raises, or when the client goes
    away (the server cancels and closes it); a response whose stream never starts releases
    the key when the server closes it. Releasing twice is harmless.
    """
    content = response.streaming_content
    released = False

    def release_once() -> None:
        nonlocal released
        if not released:
            released = True
            _release_in_thread(record)

    async def guarded():
        try:
            async for chunk in content:
                yield chunk
        finally:
            await sync_to_async(release_once)()

    response.streaming_content = guarded()
    # Django calls these when the server closes the response, whether or not it streamed.
    response._resource_closers.append(release_once)


class IdempotentPostMixin:
    """For DRF views: honour `Idempotency-Key` on POST (after authentication).

    The claimed key leaves the view saved or released on every path: `finalize_response`
    saves or releases it (a streamed response hands it to its stream), and `dispatch`
    releases a key still held when the view ends any other way (an uncaught exception)."""

    def dispatch(self, request, *args, **kwargs):
        self._idempotency = None
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            record, self._idempotency = self._idempotency, None
            if record is not None:
                idempotency_release(record=record)

    def initial(self, request, *args, **kwargs):
        self._idempotency = None
        super().initial(request, *args, **kwargs)
        key = request.headers.get(HEADER)
        if request.method == "POST" and key is not None:
            auth = request.auth
            self._idempotency = idempotency_begin(
                tenant=request_tenant(request),
                api_key=auth if isinstance(auth, ApiKey) else None,
                key=key.strip(),
                request=request,
            )

    def idempotency_attach(self, conversation_id: int) -> None:
        """Name the conversation this request acts on (see `saved_response_attach`)."""
        saved_response_attach(
            record=getattr(self, "_idempotency", None), conversation_id=conversation_id
        )

    def handle_exception(self, exc):
        if isinstance(exc, Replay):
            record = exc.record
            response = Response(record.response_body, status=record.status_code)
            response["Idempotent-Replayed"] = "true"
            return response
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        record = getattr(self, "_idempotency", None)
        if record is None:
            return response
        if isinstance(response, StreamingHttpResponse) and response.status_code < 300:
            idempotency_hold_while_streaming(record=record, response=response)
        else:
            idempotency_finish(record=record, response=response)
        self._idempotency = None
        return response
