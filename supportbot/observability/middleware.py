"""HTTP requests get a request id (the caller's `X-Request-Id` when it is plain, else a new
one), echoed in the response; views with a `conversation_id` name the conversation; a
server span covers the request when tracing is on."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

from supportbot.observability import context, tracing


class RequestContextMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        rid = self._request_id(request)
        with self._span(request):
            response = self.get_response(request)
        response[context.REQUEST_ID_HEADER] = rid
        return response

    async def __acall__(self, request):
        rid = self._request_id(request)
        with self._span(request):
            response = await self.get_response(request)
        response[context.REQUEST_ID_HEADER] = rid
        return response

    @staticmethod
    def _request_id(request) -> str:
        """Bind the ids for the rest of this request's context (not reset on the way out:
        Django logs the response after the middleware returns, and each ASGI request runs
        in a context of its own)."""
        incoming = context.clean_request_id(request.headers.get(context.REQUEST_ID_HEADER))
        request.request_id = incoming or context.new_request_id()
        context.request_id_var.set(request.request_id)
        context.conversation_id_var.set(None)
        return request.request_id

    @staticmethod
    def _span(request):
        return tracing.span(f"http {request.method}", **{"http.target": request.path[:200]})

    def process_view(self, request, view_func, view_args, view_kwargs):
        conversation_id = view_kwargs.get("conversation_id")
        if isinstance(conversation_id, int):
            context.set_conversation(conversation_id)
        return None
