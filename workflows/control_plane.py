"""The AgentThread control plane: signals, updates and queries.

Every signal goes through one dynamic handler that decodes and validates payloads, so a
malformed one becomes a `runtime.warning` and never fails a workflow task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from contract.actions import (
    SIGNAL_RESPOND_ACTION,
    UPDATE_RESPOND_ACTION_CHECKED,
    ActionResponse,
    RespondActionResult,
)
from contract.messages import (
    MessagePage,
    QueuedMessage,
    QueuedTool,
    QueuedTurnRef,
    SubmitTurnRequest,
    SubmitTurnResult,
    TerminateRequest,
)
from contract.read_models import session_snapshot
from contract.subagents import SIGNAL_SUBAGENT_REPORT, SIGNAL_VARIABLES_PROVIDED
from contract.thread import (
    QUERY_MESSAGES,
    QUERY_SESSION_SNAPSHOT,
    QUERY_THREAD_READ,
    SIGNAL_PROMOTE_QUEUED_TURN,
    SIGNAL_QUEUE_MESSAGE,
    SIGNAL_QUEUE_TOOL,
    SIGNAL_REMOVE_QUEUED_TURN,
    SIGNAL_TERMINATE,
    UPDATE_SUBMIT_TURN,
    ThreadRead,
)
from workflows import queue_control, read_models
from workflows.actions import apply_response, check_response
from workflows.child_reports import ChildReports
from workflows.control import parse_single
from workflows.thread_state import QueueEntry

MAX_MESSAGES_PAGE = 500
_SIGNALS = ", ".join(
    (
        SIGNAL_QUEUE_MESSAGE,
        SIGNAL_QUEUE_TOOL,
        SIGNAL_TERMINATE,
        SIGNAL_RESPOND_ACTION,
        SIGNAL_REMOVE_QUEUED_TURN,
        SIGNAL_PROMOTE_QUEUED_TURN,
        SIGNAL_SUBAGENT_REPORT,
        SIGNAL_VARIABLES_PROVIDED,
    )
)


class ControlPlane(ChildReports):
    """Signals, updates and queries of an AgentThread (a base of the workflow class)."""

    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Every signal lands here so a malformed payload can never fail a workflow task."""
        values, error = _decode(args)
        if error is not None:
            self._warn("malformed_signal", name, error)
            return
        if name == SIGNAL_QUEUE_MESSAGE:
            self._on_queue_message(values)
        elif name == SIGNAL_QUEUE_TOOL:
            self._on_queue_tool(values)
        elif name == SIGNAL_TERMINATE:
            self._on_terminate(values)
        elif name == SIGNAL_RESPOND_ACTION:
            self._on_respond_action(values)
        elif name in (SIGNAL_REMOVE_QUEUED_TURN, SIGNAL_PROMOTE_QUEUED_TURN):
            self._on_queue_edit(name, values)
        elif name == SIGNAL_SUBAGENT_REPORT:
            self._on_subagent_report(values)
        elif name == SIGNAL_VARIABLES_PROVIDED:
            self._on_variables_provided(values)
        else:
            self._warn("unknown_signal", name, f"no signal named {name!r}; known: {_SIGNALS}")

    def _on_respond_action(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_RESPOND_ACTION, values, ActionResponse)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_RESPOND_ACTION, parsed)
            return
        problem = check_response(self._require_mem(), parsed)
        if problem is not None:
            self._warn("unanswerable_action", SIGNAL_RESPOND_ACTION, problem)
            return
        apply_response(self._require_mem(), parsed)

    def _on_queue_edit(self, name: str, values: list[Any]) -> None:
        parsed = parse_single(name, values, QueuedTurnRef)
        if isinstance(parsed, str):
            self._warn("malformed_signal", name, parsed)
            return
        mem = self._require_mem()
        edit = queue_control.remove if name == SIGNAL_REMOVE_QUEUED_TURN else queue_control.promote
        problem = edit(mem, parsed.queue_id)
        if problem is not None:
            self._warn("unknown_queued_turn", name, problem)

    def _on_queue_message(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_QUEUE_MESSAGE, values, QueuedMessage)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_QUEUE_MESSAGE, parsed)
        elif self._refuse_when_terminated(SIGNAL_QUEUE_MESSAGE):
            return
        elif not self._too_large(SIGNAL_QUEUE_MESSAGE, parsed):
            self._queue_message(parsed)

    def _on_queue_tool(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_QUEUE_TOOL, values, QueuedTool)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_QUEUE_TOOL, parsed)
        elif self._too_large(SIGNAL_QUEUE_TOOL, parsed):
            return
        elif not self._refuse_when_terminated(SIGNAL_QUEUE_TOOL):
            mem = self._require_mem()
            self._enqueue(
                QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), tool=parsed)
            )

    def _on_terminate(self, values: list[Any]) -> None:
        # terminate accepts no payload at all, as well as {reason}.
        parsed = (
            TerminateRequest()
            if not values
            else parse_single(SIGNAL_TERMINATE, values, TerminateRequest)
        )
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_TERMINATE, parsed)
            parsed = TerminateRequest(reason="terminate signal with a malformed payload")
        self.terminate(parsed.reason)

    @workflow.update(name=UPDATE_SUBMIT_TURN)
    async def submit_turn(self, payload: Any = None) -> SubmitTurnResult:
        """Queue a message and say whether it starts a turn now, waits, or is refused."""
        request = SubmitTurnRequest.model_validate(payload)
        mem = self._require_mem()
        idle = self._is_idle() and not mem.queue
        if request.policy == "reject" and not idle:
            return queue_control.reject(mem, self._active_turn, self._status)
        entry = self._queue_message(request.message())
        if request.policy == "interrupt" and self._model_in_flight and self._in_flight:
            self._interrupted = True
            self._in_flight.cancel()
            queue_control.interrupted(mem, entry, self._active_turn)
        status = "accepted" if idle else "queued"
        return SubmitTurnResult(turn_id=entry.turn_id, status=status, queue_id=entry.queue_id)

    @workflow.update(name=UPDATE_RESPOND_ACTION_CHECKED)
    async def respond_action_checked(self, payload: Any = None) -> RespondActionResult:
        """Answer a pending action; the validator refuses what the signal would only warn."""
        response = ActionResponse.model_validate(payload)
        apply_response(self._require_mem(), response)
        return RespondActionResult(action_id=response.action_id, decision=response.decision)

    @respond_action_checked.validator
    def _validate_respond_action(self, payload: Any = None) -> None:
        parsed = parse_single(
            UPDATE_RESPOND_ACTION_CHECKED,
            [payload] if payload is not None else [],
            ActionResponse,
        )
        if isinstance(parsed, str):
            raise ApplicationError(parsed, type="InvalidPayload")
        problem = check_response(self._require_mem(), parsed)
        if problem is not None:
            raise ApplicationError(problem, type="UnanswerableAction")

    @submit_turn.validator
    def _validate_submit_turn(self, payload: Any = None) -> None:
        if self._terminated_at:
            raise ApplicationError(
                f"thread {workflow.info().workflow_id} was terminated at {self._terminated_at}"
                " and accepts no more turns",
                type="ThreadTerminated",
            )
        parsed = parse_single(
            UPDATE_SUBMIT_TURN, [payload] if payload is not None else [], SubmitTurnRequest
        )
        if isinstance(parsed, str):
            raise ApplicationError(parsed, type="InvalidPayload")
        too_large = self._size_problem(UPDATE_SUBMIT_TURN, parsed)
        if too_large is not None:
            raise ApplicationError(too_large, type="PayloadTooLarge", non_retryable=True)

    @workflow.query(name=QUERY_THREAD_READ)
    def thread_read(self) -> ThreadRead:
        """The thread read model: status, active turn, pending actions, queue, outcome."""
        mem = self._require_mem()
        return read_models.thread_read(
            mem,
            agent=self._agent().name
            if self._snapshot
            else (self._start.agent if self._start else ""),
            status=self._status,
            active_turn_id=self._active_turn,
            active_side=self._active_side,
            last_outcome=self._last_outcome,
            stop_reason=self._stop_reason,
            terminated_at=self._terminated_at,
            parent_thread_id=self._parent_id(),
            policy=self._permission_state(),
            children=[e.model_dump(mode="json", by_alias=True) for e in self._children.values()],
            usage=self.total_usage(),
        )

    @workflow.query(name=QUERY_SESSION_SNAPSHOT)
    def session_snapshot(self, page: Any = None) -> dict[str, Any]:
        """The Agent Runtime session snapshot: the shell and a recent window of messages.

        `{before?, limit?}` pages back through older history: `before` is the
        `history.olderCursor` of the previous window.
        """
        page = page if isinstance(page, dict) else {}
        mem = self._require_mem()
        index = mem.index
        before = _int_or(page.get("before"), len(index) and index[-1].position + 1)
        limit = min(max(_int_or(page.get("limit"), 50), 1), MAX_MESSAGES_PAGE)
        window = [m for m in index if m.position < before][-limit:]
        return session_snapshot(
            self.thread_read(),
            [m.model_dump(mode="json", by_alias=True) for m in window],
            older_cursor=window[0].position if window and window[0].position > 0 else None,
            total_messages=mem.index_base + len(index),
        )

    @workflow.query(name=QUERY_MESSAGES)
    def messages(self, page: Any = None) -> MessagePage:
        """Message metadata from `cursor` (a position), at most `limit` (<= 500) of them.

        After continue-as-new the thread indexes a recent window only: `oldestPosition`
        says where it starts, and older metadata is read from the store.
        """
        page = page if isinstance(page, dict) else {}
        cursor = _int_or(page.get("cursor"), 0)
        limit = min(max(_int_or(page.get("limit"), 100), 1), MAX_MESSAGES_PAGE)
        mem = self._require_mem()
        index = mem.index
        chosen = [m for m in index if m.position >= cursor][:limit]
        more = len(chosen) == limit and chosen and chosen[-1].position < index[-1].position
        return MessagePage(
            messages=chosen,
            next_cursor=chosen[-1].position + 1 if more else None,
            oldest_position=index[0].position if mem.index_base and index else None,
        )

    def _emit_snapshot(self) -> None:
        # The read model rides in the event stream, so the store can serve it once the
        # thread has closed and no worker can answer queries.
        read = self.thread_read().model_dump(mode="json", by_alias=True)
        self._require_mem().emit("snapshot.updated", {"kind": "thread_read", "threadRead": read})


def _decode(args: Sequence[RawValue]) -> tuple[list[Any], str | None]:
    converter = workflow.payload_converter()
    values = []
    for i, raw in enumerate(args):
        try:
            values.append(converter.from_payload(raw.payload))
        except Exception as err:  # any undecodable payload is the sender's error
            return [], f"argument {i} is not valid JSON: {err}"
    return values, None


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
