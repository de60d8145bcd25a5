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

# A request body: a JSON value httpx encodes, or the JSON already encoded (compact_json).
Body = dict[str, Any] | bytes


def compact_json(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON, exactly as httpx encodes a `json=` body."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _body_kwargs(body: Body, headers: dict[str, str]) -> dict[str, Any]:
    if isinstance(body, bytes):
        return {"content": body, "headers": {**headers, "content-type": "application/json"}}
    return {"json": body, "headers": headers}


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, url: str, *, body: Body, headers: dict[str, str]
) -> AsyncIterator[httpx.Response]:
    """POST `body` and yield the streaming response once its status says success."""
    try:
        async with client.stream("POST", url, **_body_kwargs(body, headers)) as response:
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
    client: httpx.AsyncClient, url: str, *, body: Body, headers: dict[str, str]
) -> Any:
    """POST `body` without streaming and return the decoded JSON reply."""
    try:
        response = await client.post(url, **_body_kwargs(body, headers))
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
