"""`variables.request`: record a deferred subagent's scoped-variable request (Runtime §7.5).

The parent workflow runs it when `subagent_create` lacks scoped env, so the gateway can
show the request and accept its values.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.exceptions import ApplicationError

from weft.contract.subagents import ACTIVITY_VARIABLES_REQUEST, VariableRequest
from weft.store import Store


class VariableRequestActivities:
    """Writes variable requests to the store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name=ACTIVITY_VARIABLES_REQUEST)
    async def request_variables(self, request: VariableRequest) -> None:
        """Record `request` as pending; a retry or a repeat of its id changes nothing."""
        if not request.missing:
            raise ApplicationError(
                f"variable request {request.request_id!r} asks for no variables",
                type="InvalidVariableRequest",
                non_retryable=True,
            )
        await asyncio.to_thread(self._store.variable_requests.create, request)
