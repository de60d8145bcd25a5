"""The HTTP and SSE API of `weft serve`: threads, control, events and the inbox page (docs/http-api.md)."""

from weft.api.app import create_api

__all__ = ["create_api"]
