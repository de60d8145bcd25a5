"""Connecting to Temporal with weft's data converter."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter


async def connect(
    address: str, *, namespace: str = "default", api_key: str | None = None, tls: bool = False
) -> Client:
    """A Temporal client that speaks pydantic JSON, as every weft worker does."""
    return await Client.connect(
        address,
        namespace=namespace,
        api_key=api_key,
        tls=tls or bool(api_key),
        data_converter=pydantic_data_converter,
    )
