from rest_framework.pagination import CursorPagination


class CreatedCursorPagination(CursorPagination):
    """Stable cursor pagination, newest first, for append-mostly tables."""

    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
