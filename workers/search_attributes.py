"""Registers weft's search attributes on a Temporal namespace (idempotent)."""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client

from workflows.search_attributes import ALL_KEYS


async def ensure_search_attributes(client: Client, namespace: str) -> list[str]:
    """Add any of weft's keyword attributes the namespace lacks; returns the ones added."""
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = {
        key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        for key in ALL_KEYS
        if key.name not in listed.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
