"""All of weft's HTTP: the API of `weft serve` (threads, control, events, the inbox page;
docs/http-api.md) over the gateway app and its uvicorn server in `gateway/`."""

from weft.api.app import create_api

__all__ = ["create_api"]
