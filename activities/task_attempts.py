"""`task.attempt`: one attempt of a task, asked of its thread and judged.

The objective is sent to the attempt's thread with `submit_turn` and `wait: "completed"`
(docs/waiting-for-turns.md), under the attempt id as the update id: a retried activity
(a worker died mid-turn) attaches to the same turn instead of asking twice. The answer is
accepted when the turn completed and, with an acceptance schema, the answer is JSON that
validates against it. The attempt's end is written here, the activity that learns it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
from temporalio import activity
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from weft.activities.clock import now_iso
from weft.contract.events import Event
from weft.contract.messages import SubmitTurnRequest, SubmitTurnResult
from weft.contract.tasks import (
    ACTIVITY_TASK_ATTEMPT,
    AttemptInput,
    AttemptResult,
    TaskOutput,
    attempt_end_event_id,
)
from weft.contract.thread import UPDATE_SUBMIT_TURN
from weft.contract.turns import TurnResult
from weft.store import Store

_HEARTBEAT_SECONDS = 5.0
# A transient Temporal error while waiting for the turn is retried here, on the same update
# id: the activity itself is not retried (a timed-out heartbeat means the attempt is lost).
_RPC_BACKOFF_SECONDS = (0.5, 1.0, 2.0, 5.0)
# An accepted answer's text kept in the task's read model; the whole is the stored message.
_RESPONSE_CHARS = 20_000


class AttemptRefused(Exception):
    """The attempt ended without an acceptable answer; the message says why."""


class TaskAttemptActivities:
    """Runs attempts over the Temporal client the worker polls with."""

    def __init__(self, store: Store, client: Client) -> None:
        self._store = store
        self._client = client

    @activity.defn(name=ACTIVITY_TASK_ATTEMPT)
    async def attempt(self, attempt: AttemptInput) -> AttemptResult:
        """Ask the objective, judge the answer, store the attempt's end."""
        ended: dict[str, Any] = {"attemptId": attempt.attempt_id}
        try:
            turn = await self._ask(attempt)
            ended["turnId"] = turn.turn_id
            output = await self._accepted(attempt, turn)
        except AttemptRefused as refused:
            ended |= {"status": "failed", "error": str(refused)}
            kind = "task.attempt.failed"
        else:
            ended |= {"status": "completed", "output": output.model_dump(mode="json")}
            kind = "task.attempt.completed"
        event = _attempt_event(attempt, kind, {**ended, "endedAt": now_iso()})
        await asyncio.to_thread(self._store.tasks.record, [Event.model_validate(event)])
        return AttemptResult(event=event, accepted=kind == "task.attempt.completed")

    async def _ask(self, attempt: AttemptInput) -> TurnResult:
        """The turn's result; AttemptRefused when the thread ended or refused first."""
        request = SubmitTurnRequest(role="user", content=attempt.objective, wait="completed")
        handle = self._client.get_workflow_handle(attempt.thread_id)
        beat = asyncio.create_task(_heartbeat())
        try:
            result = await _submit(handle, request, attempt.attempt_id)
        except WorkflowUpdateFailedError as err:
            why = await _failure(handle) or _innermost(err.cause)
            raise AttemptRefused(f"thread {attempt.thread_id} did not answer: {why}") from None
        except RPCError:  # NOT_FOUND: the thread is gone
            why = await _failure(handle) or "it ended before answering"
            raise AttemptRefused(f"thread {attempt.thread_id} did not answer: {why}") from None
        finally:
            beat.cancel()
        if result.turn is None:
            raise AttemptRefused(f"thread {attempt.thread_id} answered without a turn result")
        return result.turn

    async def _accepted(self, attempt: AttemptInput, turn: TurnResult) -> TaskOutput:
        """The attempt's output when the turn's answer meets the acceptance criteria."""
        if turn.status != "completed":
            why = turn.error or turn.stop_reason or "no reason given"
            raise AttemptRefused(f"the turn ended {turn.status}: {why}")
        response = turn.response
        if response is None and turn.message_id is not None:
            message = await asyncio.to_thread(
                self._store.messages.get, attempt.thread_id, turn.message_id
            )
            response = (
                message.content
                if message is not None and isinstance(message.content, str)
                else None
            )
        output = TaskOutput(
            thread_id=attempt.thread_id,
            message_id=turn.message_id,
            response=(response or "")[:_RESPONSE_CHARS],
        )
        schema = attempt.acceptance.schema_
        if schema is None:
            return output
        return output.model_copy(update={"structured": _structured(response, schema)})


async def _submit(
    handle: WorkflowHandle[Any, Any], request: SubmitTurnRequest, update_id: str
) -> SubmitTurnResult:
    """The turn's result; a transient RPC error is retried on the same update id (which
    attaches to the same turn), NOT_FOUND is raised."""
    for backoff in (*_RPC_BACKOFF_SECONDS, None):
        try:
            result: SubmitTurnResult = await handle.execute_update(
                UPDATE_SUBMIT_TURN,
                request.model_dump(mode="json", by_alias=True, exclude_none=True),
                id=update_id,
                result_type=SubmitTurnResult,
            )
            return result
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND or backoff is None:
                raise
            await asyncio.sleep(backoff)
    raise AssertionError("unreachable")


async def _failure(handle: WorkflowHandle[Any, Any]) -> str | None:
    """Why the thread's workflow failed (its start was refused: an unknown agent, …)."""
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.FAILED:
            return None
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        return _innermost(err)
    except RPCError:
        return None
    return None


def _innermost(err: BaseException) -> str:
    """The message of the deepest cause (why a thread refused: its start failure)."""
    while err.__cause__ is not None:
        err = err.__cause__
    return str(err)


def _structured(response: str | None, schema: dict[str, Any]) -> Any:
    """The answer as JSON valid against `schema`; AttemptRefused naming what is wrong."""
    try:
        value = json.loads(response or "")
    except ValueError as err:
        raise AttemptRefused(
            f"the answer is not JSON ({err}), and the task requires a structured result"
        ) from None
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(value)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise AttemptRefused(
            f"the answer does not meet the task's schema at {where}: {error.message}"
        )
    return value


def _attempt_event(attempt: AttemptInput, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """The attempt's end, under the one id either writer uses (`attempt_end_event_id`)."""
    return Event.model_validate(
        {
            "type": kind,
            "eventId": attempt_end_event_id(attempt.attempt_id),
            "timestamp": now_iso(),
            "threadId": attempt.task_id,  # the task's log
            "runId": attempt.run_id,
            "attemptId": attempt.attempt_id,
            "taskId": attempt.task_id,
            "status": "running",  # the task's: it runs until the workflow decides what next
            "payload": {"attempt": data},
        }
    ).to_wire()


async def _heartbeat() -> None:
    """Beat while the turn runs, well within the heartbeat timeout, so only a dead (or
    stalled) worker's attempt is lost."""
    timeout = activity.info().heartbeat_timeout
    every = (
        _HEARTBEAT_SECONDS
        if timeout is None
        else min(_HEARTBEAT_SECONDS, timeout.total_seconds() / 4)
    )
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)
