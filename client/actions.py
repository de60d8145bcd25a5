"""Answering a thread that waits for a human, and finding the threads that do.

Plain Temporal underneath: the `respond_action` signal or `respond_action_checked` update
with the JSON documented in docs/human-in-the-loop.md, and a visibility query on the
`WeftAwaitingAction` search attribute.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client

from weft.client.thread_tenant import tenant_clause
from weft.contract.actions import (
    SIGNAL_RESPOND_ACTION,
    UPDATE_RESPOND_ACTION_CHECKED,
    ActionKind,
    ActionResponse,
    RespondActionResult,
)


def response(
    action_id: str,
    decision: str,
    *,
    answer: Any = None,
    scope: str = "once",
    reason: str | None = None,
) -> ActionResponse:
    """A validated answer; raises pydantic's ValidationError naming the bad field."""
    return ActionResponse.model_validate(
        {
            "actionId": action_id,
            "decision": decision,
            "answer": answer,
            "scope": scope,
            "reason": reason,
        }
    )


async def respond(client: Client, thread_id: str, answer: ActionResponse) -> None:
    """Send the answer as a signal: fire and forget; a wrong answer becomes a warning."""
    await client.get_workflow_handle(thread_id).signal(SIGNAL_RESPOND_ACTION, answer)


async def respond_checked(
    client: Client, thread_id: str, answer: ActionResponse
) -> RespondActionResult:
    """Send the answer as an update: raises WorkflowUpdateFailedError saying what is wrong."""
    # The converter builds the model (`result_type`); `model_validate` passes it through, typed.
    return RespondActionResult.model_validate(
        await client.get_workflow_handle(thread_id).execute_update(
            UPDATE_RESPOND_ACTION_CHECKED, answer, result_type=RespondActionResult
        )
    )


def waiting_query(
    kind: ActionKind | None = None, *, agent: str | None = None, tenant: str | None = None
) -> str:
    """The visibility query listing threads that wait on a human (of one kind, one agent,
    one tenant)."""
    query = (
        f"WeftAwaitingAction = '{kind}'"
        if kind
        else "WeftAwaitingAction IN ('ask_human', 'tool_permission', 'elicitation')"
    )
    if agent:
        query += f" AND WeftAgent = '{_quoted(agent)}'"
    if tenant:
        query += f" AND {tenant_clause(tenant)}"
    return query + " AND ExecutionStatus = 'Running'"


def _quoted(value: str) -> str:
    """`value` safe inside a visibility query's single quotes."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


async def waiting_threads(
    client: Client,
    kind: ActionKind | None = None,
    *,
    agent: str | None = None,
    tenant: str | None = None,
) -> list[str]:
    """Ids of the threads waiting on a human (of `tenant`'s only, when given; visibility
    is eventually consistent)."""
    query = waiting_query(kind, agent=agent, tenant=tenant)
    return [w.id async for w in client.list_workflows(query)]
