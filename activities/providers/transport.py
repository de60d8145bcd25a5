"""HTTP plumbing shared by the adapters: every failure leaves as a classified ApplicationError."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from weft.activities.providers.errors import (
    classify_http_error,
    classify_transport_error,
    excerpt,
    protocol_error,
)


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, url: str, *, body: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[httpx.Response]:
    """POST `body` and yield the streaming response once its status says success."""
    try:
        async with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code >= 400:
                raw = await response.aread()
                raise classify_http_error(
                    response.status_code, response.headers, raw.decode("utf-8", "replace")
                )
            # Transport errors raised while the caller reads the body land here too.
            yield response
    except httpx.RequestError as exc:
        raise classify_transport_error(exc) from exc


async def post_json(
    client: httpx.AsyncClient, url: str, *, body: dict[str, Any], headers: dict[str, str]
) -> Any:
    """POST `body` without streaming and return the decoded JSON reply."""
    try:
        response = await client.post(url, json=body, headers=headers)
    except httpx.RequestError as exc:
        raise classify_transport_error(exc) from exc
    if response.status_code >= 400:
        raise classify_http_error(response.status_code, response.headers, response.text)
    return loads(response.text, what="reply body")


def loads(text: str, *, what: str) -> Any:
    """Decode JSON, naming `what` and quoting the text when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise protocol_error(f"invalid JSON in {what} ({exc}): {excerpt(text, 120)}") from None
