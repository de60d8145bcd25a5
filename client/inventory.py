"""The tool inventory and execution environment of a thread: live by query, or from the store.

A running thread answers `get_tool_inventory` / `get_execution_environment`. A closed
thread (or one no worker answers for) is read from the store: the thread writes both as
`snapshot.updated` events when it closes. Apart from `resume.py` because `Threads` uses
it and `resume` imports `threads`.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

from temporalio.client import Client

from weft.client.liveness import QUERY_TIMEOUT, UNANSWERED, is_running
from weft.client.stored_snapshots import stored_snapshot
from weft.contract.inventory import (
    KIND_EXECUTION_ENVIRONMENT,
    KIND_TOOL_INVENTORY,
    QUERY_EXECUTION_ENVIRONMENT,
    QUERY_TOOL_INVENTORY,
    ExecutionEnvironment,
    ToolInventory,
)
from weft.store import Store

Snapshot = TypeVar("Snapshot", ToolInventory, ExecutionEnvironment)

# kind → the payload field that holds it, for each read model here.
_FIELDS = {KIND_TOOL_INVENTORY: "toolInventory", KIND_EXECUTION_ENVIRONMENT: "executionEnvironment"}


def tool_inventory_from_store(store: Store, thread_id: str) -> ToolInventory | None:
    """The inventory the thread wrote when it closed; None if it has not closed (or never
    wrote one: it closed before this version)."""
    return _from_store(store, thread_id, KIND_TOOL_INVENTORY, ToolInventory)


def environment_from_store(store: Store, thread_id: str) -> ExecutionEnvironment | None:
    """The environment the thread wrote when it closed; None like `tool_inventory_from_store`."""
    return _from_store(store, thread_id, KIND_EXECUTION_ENVIRONMENT, ExecutionEnvironment)


async def tool_inventory(
    client: Client, store: Store | None, thread_id: str
) -> ToolInventory | None:
    """The live inventory by query, or the stored one when the thread cannot answer."""
    return await _read(
        client, store, thread_id, QUERY_TOOL_INVENTORY, KIND_TOOL_INVENTORY, ToolInventory
    )


async def execution_environment(
    client: Client, store: Store | None, thread_id: str
) -> ExecutionEnvironment | None:
    """The live environment by query, or the stored one when the thread cannot answer."""
    return await _read(
        client,
        store,
        thread_id,
        QUERY_EXECUTION_ENVIRONMENT,
        KIND_EXECUTION_ENVIRONMENT,
        ExecutionEnvironment,
    )


def _from_store(store: Store, thread_id: str, kind: str, model: type[Snapshot]) -> Snapshot | None:
    event = stored_snapshot(store, thread_id, kind)
    if event is None:
        return None
    found = model.model_validate(event.payload[_FIELDS[kind]])
    return found.model_copy(update={"source": "store"})


async def _read(
    client: Client,
    store: Store | None,
    thread_id: str,
    query: str,
    kind: str,
    model: type[Snapshot],
) -> Snapshot | None:
    if await is_running(client, thread_id):
        try:
            # The converter builds the model (`result_type`); this passes it through, typed.
            return model.model_validate(
                await client.get_workflow_handle(thread_id).query(
                    query, result_type=model, rpc_timeout=QUERY_TIMEOUT
                )
            )
        except UNANSWERED:
            pass  # no worker answered: fall back to what the thread wrote when it closed
    if store is None:
        raise ValueError(
            f"thread {thread_id} cannot answer the {query} query (closed, or no worker "
            "replied) and there is no store to read what it wrote when it closed"
        )
    return await asyncio.to_thread(_from_store, store, thread_id, kind, model)
