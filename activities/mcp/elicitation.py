"""MCP elicitation during a tool call: ask a person through the thread's own workflow.

The `tool.call` activity signals its workflow (`mcp_elicitation`), which raises an
`action.required` human action and enforces the server's timeout durably; the activity
then polls the workflow's `mcp_elicitation_answer` query until the answer (a person's, or
the timeout's `cancel`) is there, and hands it to the server.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle

from weft.contract.activities import ToolCallInput
from weft.contract.mcp import (
    QUERY_MCP_ELICITATION,
    SIGNAL_MCP_ELICITATION,
    ElicitationAnswer,
    McpElicitation,
    McpServerDef,
)

POLL_SECONDS = 0.5
# Consecutive failed queries (about 10 s) after which the server is told `cancel`.
_MAX_QUERY_FAILURES = 20


class ElicitationBridge:
    """The `ElicitationHandler` of one tool call's MCP session.

    Everything it needs of the activity is taken when it is built, inside the activity:
    the MCP session may call it from a task of its own, where `activity.*` is not at hand.
    The activity's own heartbeats (`tool.call`'s `Heartbeater`) go on while it waits.
    `close()` ends a wait early (the call is over or cancelled): the server gets `cancel`.
    """

    def __init__(
        self, call: ToolCallInput, server: McpServerDef, *, poll_seconds: float = POLL_SECONDS
    ) -> None:
        info = activity.info()
        self._call = call
        self._server = server
        self._attempt = info.attempt
        self._workflow_id = info.workflow_id
        self._client: Client | None = None
        with contextlib.suppress(RuntimeError):  # a test environment may have no client
            self._client = activity.client()
        self._poll = poll_seconds
        self._asked = 0
        self._closed = asyncio.Event()

    def close(self) -> None:
        """Stop waiting: the call is over."""
        self._closed.set()

    async def __call__(self, message: str, requested_schema: dict[str, Any]) -> ElicitationAnswer:
        self._asked += 1
        action_id = f"{self._call.tool_call.id}:elicit:a{self._attempt}:{self._asked}"
        cancel = ElicitationAnswer(action_id=action_id, action="cancel")
        if self._client is None or not self._workflow_id or self._closed.is_set():
            return cancel
        handle = self._client.get_workflow_handle(self._workflow_id)
        request = McpElicitation(
            action_id=action_id,
            tool_call_id=self._call.tool_call.id,
            tool_name=self._call.tool_call.function.name,
            turn_id=self._call.turn_id,
            step_id=self._call.step_id,
            server=self._server.name,
            message=message,
            requested_schema=requested_schema,
            timeout_seconds=self._server.elicitation_timeout_seconds,
        )
        try:
            # Plain JSON: the workflow's one dynamic signal handler decodes it itself.
            await handle.signal(
                SIGNAL_MCP_ELICITATION, request.model_dump(mode="json", by_alias=True)
            )
        except Exception:  # the workflow cannot be reached: nobody can answer
            return cancel
        return await self._answer(handle, action_id) or cancel

    async def _answer(
        self, handle: WorkflowHandle[Any, Any], action_id: str
    ) -> ElicitationAnswer | None:
        """Poll until the workflow knows the answer; None when the wait is given up."""
        failures = 0
        while not self._closed.is_set():
            try:
                raw = await handle.query(QUERY_MCP_ELICITATION, action_id)
                failures = 0
            except Exception:  # a busy or restarting worker: ask again
                failures += 1
                if failures >= _MAX_QUERY_FAILURES:
                    return None
                raw = None
            if raw is not None:
                return ElicitationAnswer.model_validate(raw)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), self._poll)
        return None
