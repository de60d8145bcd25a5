"""The AgentThread workflow: one agent thread, its step cycle and its control plane.

The workflow id is the thread id. The step cycle follows Runtime §3; content lives in
the store and reaches Temporal history about once (a signal, an activity input or
result), so history grows linearly with the conversation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from contract.actions import (
    SIGNAL_RESPOND_ACTION,
    UPDATE_RESPOND_ACTION_CHECKED,
    ActionKind,
    ActionResponse,
    RespondActionResult,
)
from contract.activities import (
    ACTIVITY_MODEL_CALL,
    ACTIVITY_THREAD_INIT,
    Intent,
    ModelCallInput,
    ModelCallResult,
    ThreadInitInput,
    ThreadInitResult,
)
from contract.definitions import DefinitionSnapshot
from contract.events import Event
from contract.messages import (
    MessagePage,
    QueuedMessage,
    QueuedTool,
    QueuedTurnRef,
    Side,
    SubmitTurnRequest,
    SubmitTurnResult,
    TerminateRequest,
)
from contract.read_models import session_snapshot
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
    WORKFLOW_TYPE,
    StopReason,
    ThreadRead,
    ThreadResult,
    ThreadStartInput,
    ThreadStatus,
)
from contract.validation import describe_validation_error
from workflows import queue_control, read_models, search_attributes
from workflows.actions import apply_response, check_response
from workflows.control import parse_single
from workflows.outbox import flush
from workflows.stop_rules import StepFacts, Stop, evaluate_step, session_turns_exhausted
from workflows.thread_state import QueueEntry, ThreadMemory
from workflows.tool_runner import ToolRunner

MAX_MESSAGES_PAGE = 500
_SIGNALS = ", ".join(
    (
        SIGNAL_QUEUE_MESSAGE,
        SIGNAL_QUEUE_TOOL,
        SIGNAL_TERMINATE,
        SIGNAL_RESPOND_ACTION,
        SIGNAL_REMOVE_QUEUED_TURN,
        SIGNAL_PROMOTE_QUEUED_TURN,
    )
)


@workflow.defn(name=WORKFLOW_TYPE)
class AgentThreadWorkflow:
    """One Standard Agents thread, driven by queued messages, tools and terminate."""

    def __init__(self) -> None:
        self._mem: ThreadMemory | None = None
        self._start: ThreadStartInput | None = None
        self._snapshot: DefinitionSnapshot | None = None
        self._status: ThreadStatus = "preparing"
        self._active_turn: str | None = None
        self._active_side: Side | None = None
        self._stop_reason: StopReason | None = None
        self._last_outcome: str | None = None
        self._terminated_at: str | None = None
        self._terminate_reason: str | None = None
        self._in_flight: asyncio.Task[Any] | None = None
        self._model_in_flight = False
        self._interrupted = False

    # ---- lifecycle -------------------------------------------------------------------

    @workflow.run
    async def run(self, start: Any = None) -> ThreadResult:
        # The start input is validated here, not by the converter: a decode failure in the
        # converter would fail the workflow task forever instead of failing the thread.
        try:
            self._start = ThreadStartInput.model_validate(start)
        except ValidationError as err:
            raise ApplicationError(
                f"invalid AgentThread start input: {describe_validation_error(err)}",
                type="InvalidStartInput",
                non_retryable=True,
            ) from None
        mem = self._mem = ThreadMemory(
            thread_id=workflow.info().workflow_id, session_id=self._start.session_id
        )
        for message in self._start.messages:
            self._enqueue(
                QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), message=message)
            )
        mem.emit(
            "thread.started", {"agent": self._start.agent, "parentThreadId": self._parent_id()}
        )
        await self._init()
        while not self._terminated_at:
            await workflow.wait_condition(lambda: bool(mem.queue) or bool(self._terminated_at))
            if self._terminated_at:
                break
            await self._run_session()
        return await self._close()

    async def _init(self) -> None:
        assert self._start is not None and self._mem is not None
        search_attributes.upsert_initial(
            self._start.agent, self._parent_id(), self._start.session_id
        )
        outbox = self._mem.take_outbox()
        try:
            result = await self._init_activity(outbox)
        except ActivityError as err:
            # The thread cannot run (unknown agent, store down past retries): fail it with
            # the cause on top, rather than an opaque activity error.
            self._set_status("failed")
            raise ApplicationError(
                f"thread {self._mem.thread_id} could not start: {_failure_text(err)}",
                type="ThreadInitFailed",
                non_retryable=True,
            ) from err
        self._snapshot = result.snapshot
        self._set_status("waiting_input")

    async def _init_activity(self, outbox: list[Event]) -> ThreadInitResult:
        start, mem = self._require_start(), self._require_mem()
        result: ThreadInitResult = await workflow.execute_activity(
            ACTIVITY_THREAD_INIT,
            ThreadInitInput(
                thread_id=mem.thread_id,
                agent=start.agent,
                session_id=start.session_id,
                user_id=start.user_id,
                parent_thread_id=self._parent_id(),
                env=start.env,
                outbox=outbox,
            ),
            result_type=ThreadInitResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(
                maximum_attempts=10, non_retryable_error_types=["UnknownAgent"]
            ),
        )
        return result

    async def _close(self) -> ThreadResult:
        mem = self._require_mem()
        self._set_status("cancelled")
        self._emit_snapshot()
        await flush(mem, thread_row=self.thread_row())
        await workflow.wait_condition(workflow.all_handlers_finished)
        return ThreadResult(
            thread_id=mem.thread_id,
            status=self._status,
            stop_reason=self._stop_reason,
            terminated_at=self._terminated_at,
            reason=self._terminate_reason,
            counters=mem.counters,
            usage=mem.usage,
        )

    # ---- the session and its steps ---------------------------------------------------

    async def _run_session(self) -> None:
        mem, snapshot = self._require_mem(), self._require_snapshot()
        head = mem.queue[0]
        side: Side = "a"
        if snapshot.agent.type == "dual_ai" and head.message and head.message.role == "assistant":
            side = "b"
        turn_id = head.turn_id
        mem.counters.session_steps = mem.counters.side_a_turns = mem.counters.side_b_turns = 0
        self._stop_reason = None
        self._set_status("running")
        while not self._terminated_at:
            stop = await self._run_turn(side, turn_id)
            if stop is None or stop.scope == "session" or snapshot.agent.type == "ai_human":
                break
            if session_turns_exhausted(
                snapshot.agent, mem.counters.side_a_turns, mem.counters.side_b_turns
            ):
                self._stop_reason = "max_session_turns"
                break
            side = "b" if side == "a" else "a"
            turn_id = mem.new_id("turn")
        mem.emit("thread.updated", {"status": "idle", "stopReason": self._stop_reason})
        self._active_turn = self._active_side = None
        if not self._terminated_at:
            self._set_status("waiting_input")
            self._emit_snapshot()
            await flush(mem, thread_row=self.thread_row())

    async def _run_turn(self, side: Side, turn_id: str) -> Stop | None:
        """Run steps of one side until a stop; None when the turn failed or was aborted."""
        mem = self._require_mem()
        self._active_turn, self._active_side = turn_id, side
        mem.emit("turn.started", {"side": side}, turn_id=turn_id)
        side_steps = 0
        while not self._terminated_at:
            side_steps += 1
            mem.counters.steps += 1
            mem.counters.session_steps += 1
            if side == "a":
                mem.counters.side_a_steps += 1
            else:
                mem.counters.side_b_steps += 1
            stop = await self._step(side, turn_id, side_steps)
            if stop is None:
                continue
            if stop.reason == "step_error" or self._terminated_at:
                mem.emit("turn.failed", {"reason": self._stop_reason}, turn_id=turn_id)
                return None
            self._finish_turn(side, turn_id, stop)
            return stop
        mem.emit("turn.failed", {"reason": "aborted_by_user"}, turn_id=turn_id)
        return None

    def _finish_turn(self, side: Side, turn_id: str, stop: Stop) -> None:
        mem = self._require_mem()
        if side == "a":
            mem.counters.side_a_turns += 1
        else:
            mem.counters.side_b_turns += 1
        mem.counters.turns += 1
        self._stop_reason = stop.reason
        self._last_outcome = stop.response
        if stop.response is not None and stop.reason != "stop_on_response":
            # The lifecycle tool's argument becomes the visible response of the turn.
            mem.outbox_messages.append(
                mem.new_message(
                    role="assistant",
                    content=stop.response,
                    side=side,
                    turn_id=turn_id,
                    attachments=list(stop.attachments),
                    metadata={"status_kind": stop.reason},
                )
            )
        mem.emit("turn.completed", {"side": side, "stopReason": stop.reason}, turn_id=turn_id)

    async def _step(self, side: Side, turn_id: str, side_steps: int) -> Stop | None:
        """Runtime §3 steps 1-7 for one model call; a Stop, or None to continue."""
        mem, snapshot = self._require_mem(), self._require_snapshot()
        step_id = mem.new_id("step")
        new_messages = await self._drain_queue(side, turn_id, step_id)  # 1
        if self._terminated_at:
            return Stop("session", "aborted_by_user")
        reply = await self._call_model(side, turn_id, step_id, new_messages)  # 2-4
        while reply == "interrupted":
            # submit_turn(policy=interrupt) cancelled the call: the drained messages went
            # back to the outbox; restart the step with whatever is queued now.
            more = await self._drain_queue(side, turn_id, step_id)
            reply = await self._call_model(side, turn_id, step_id, more)
        if reply is None:
            return Stop("session", self._stop_reason or "step_error")
        outcomes = await self._tools.run_calls(  # 5-6
            reply.message.tool_calls or [], side=side, turn_id=turn_id, step_id=step_id
        )
        if self._terminated_at:
            return Stop("session", "aborted_by_user")
        side_cfg = snapshot.agent.side(side)
        return evaluate_step(
            StepFacts(  # 7
                side=side_cfg,
                reply=reply.message,
                outcomes=outcomes,
                side_steps_in_turn=side_steps,
                session_steps=mem.counters.session_steps,
                max_total_steps=self._require_start().options.max_total_steps,
            )
        )

    async def _drain_queue(self, side: Side, turn_id: str, step_id: str) -> list[Any]:
        """Take every queued entry, FIFO; queued tools run now through the tool flow."""
        mem = self._require_mem()
        if not mem.queue:
            return []
        pending: list[Any] = []
        while mem.queue:
            entry = mem.queue.popleft()
            if entry.message is not None:
                msg = entry.message
                pending.append(
                    mem.new_message(
                        role=msg.role,
                        content=msg.content,
                        side=_side_of(msg.role),
                        turn_id=turn_id,
                        attachments=msg.attachments,
                        silent=msg.silent,
                        metadata=msg.metadata,
                    )
                )
            elif entry.tool is not None:
                await self._tools.run_queued(
                    entry.tool, prior=pending, side=side, turn_id=turn_id, step_id=step_id
                )
                pending = []
        mem.emit(
            "queue.changed",
            {"action": "drained", "queue": mem.queue_snapshot()},
            turn_id=turn_id,
            step_id=step_id,
        )
        return pending

    async def _call_model(
        self, side: Side, turn_id: str, step_id: str, new_messages: list[Any]
    ) -> ModelCallResult | Literal["interrupted"] | None:
        """Call the side's model, then its fallbacks in order; None when all failed."""
        mem, snapshot, start = self._require_mem(), self._require_snapshot(), self._require_start()
        prompt = snapshot.prompts[snapshot.agent.side(side).prompt]
        candidates = [prompt.model, *snapshot.models[prompt.model].fallbacks]
        message_id, position = mem.new_id("msg"), mem.reserve_position()
        new_messages = [*mem.take_outbox_messages(), *new_messages]
        last_error = "no model was tried"
        for model_name in candidates:
            outbox = mem.take_outbox()
            self._in_flight = workflow.start_activity(
                ACTIVITY_MODEL_CALL,
                ModelCallInput(
                    thread_id=mem.thread_id,
                    session_id=mem.session_id,
                    snapshot_id=snapshot.snapshot_id,
                    side=side,
                    model=model_name,
                    turn_id=turn_id,
                    step_id=step_id,
                    step=mem.counters.steps,
                    assistant_message_id=message_id,
                    assistant_position=position,
                    new_messages=new_messages,
                    outbox=outbox,
                ),
                result_type=ModelCallResult,
                start_to_close_timeout=timedelta(seconds=start.options.model_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=start.options.heartbeat_timeout_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=start.options.model_max_attempts,
                ),
            )
            self._model_in_flight = True
            try:
                result: ModelCallResult = await self._in_flight
            except ActivityError as err:
                mem.return_outbox(outbox)
                if self._interrupted and not self._terminated_at:
                    self._interrupted = False
                    mem.outbox_messages[:0] = new_messages
                    mem.emit(
                        "model.failed",
                        {"code": "interrupted", "model": model_name, "messageId": message_id},
                        turn_id=turn_id,
                        step_id=step_id,
                    )
                    return "interrupted"
                if self._terminated_at or isinstance(err.cause, CancelledError):
                    self._stop_reason = "aborted_by_user"
                    break
                last_error = _failure_text(err)
                mem.incident("model_failed", last_error, turn_id=turn_id, step_id=step_id)
                mem.emit(
                    "runtime.warning",
                    {"code": "model_failed", "model": model_name, "message": last_error},
                    turn_id=turn_id,
                    step_id=step_id,
                )
                continue
            finally:
                self._in_flight = None
                self._model_in_flight = False
            self._interrupted = False
            mem.index_message(result.message)
            _add_usage(mem, result)
            return result
        # Nothing answered: keep the drained messages (idempotent writes) and fail the turn.
        mem.outbox_messages.extend(new_messages)
        if self._stop_reason != "aborted_by_user":
            self._stop_reason = "step_error"
            self._last_outcome = last_error
            mem.incident("step_error", last_error, turn_id=turn_id, step_id=step_id)
        return None

    # ---- control plane ---------------------------------------------------------------

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
        else:
            self._queue_message(parsed)

    def _on_queue_tool(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_QUEUE_TOOL, values, QueuedTool)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_QUEUE_TOOL, parsed)
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

    def terminate(self, reason: str | None) -> None:
        """Soft shutdown (Runtime §10): stamp, abort in-flight work, refuse new work."""
        if self._refuse_when_terminated(SIGNAL_TERMINATE):
            return
        mem = self._require_mem()
        self._terminated_at = mem.timestamp()
        self._terminate_reason = reason
        mem.emit(
            "thread.updated",
            {"status": "cancelled", "terminatedAt": self._terminated_at, "reason": reason},
        )
        if self._in_flight is not None and not self._in_flight.done():
            self._in_flight.cancel()

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

    @workflow.query(name=QUERY_THREAD_READ)
    def thread_read(self) -> ThreadRead:
        """The thread read model: status, active turn, pending actions, queue, outcome."""
        mem = self._require_mem()
        return read_models.thread_read(
            mem,
            agent=self._start.agent if self._start else "",
            status=self._status,
            active_turn_id=self._active_turn,
            active_side=self._active_side,
            last_outcome=self._last_outcome,
            stop_reason=self._stop_reason,
            terminated_at=self._terminated_at,
            parent_thread_id=self._parent_id(),
            policy=self._permission_state(),
        )

    @workflow.query(name=QUERY_SESSION_SNAPSHOT)
    def session_snapshot(self, page: Any = None) -> dict[str, Any]:
        """The Agent Runtime session snapshot: the shell and a recent window of messages.

        `{before?, limit?}` pages back through older history: `before` is the
        `history.olderCursor` of the previous window.
        """
        page = page if isinstance(page, dict) else {}
        index = self._require_mem().index
        before = _int_or(page.get("before"), len(index) and index[-1].position + 1)
        limit = min(max(_int_or(page.get("limit"), 50), 1), MAX_MESSAGES_PAGE)
        window = [m for m in index if m.position < before][-limit:]
        return session_snapshot(
            self.thread_read(),
            [m.model_dump(mode="json", by_alias=True) for m in window],
            older_cursor=window[0].position if window and window[0].position > 0 else None,
            total_messages=len(index),
        )

    @workflow.query(name=QUERY_MESSAGES)
    def messages(self, page: Any = None) -> MessagePage:
        """Message metadata from `cursor` (a position), at most `limit` (<= 500) of them."""
        page = page if isinstance(page, dict) else {}
        cursor = _int_or(page.get("cursor"), 0)
        limit = min(max(_int_or(page.get("limit"), 100), 1), MAX_MESSAGES_PAGE)
        index = self._require_mem().index
        chosen = [m for m in index if m.position >= cursor][:limit]
        more = len(chosen) == limit and chosen and chosen[-1].position < index[-1].position
        return MessagePage(messages=chosen, next_cursor=chosen[-1].position + 1 if more else None)

    # ---- helpers ---------------------------------------------------------------------

    @property
    def _tools(self) -> ToolRunner:
        return ToolRunner(
            self._require_mem(), self._require_snapshot(), self._require_start().options, self
        )

    # ToolHost: what the tool runner may ask of the thread.
    def is_terminated(self) -> bool:
        return self._terminated_at is not None

    def track(self, task: Any) -> None:
        self._in_flight = task

    def set_waiting(self, kind: ActionKind | None) -> None:
        """Show that the thread waits on a human (status and search attribute), or not."""
        if kind is None:
            self._set_status("running")
        else:
            self._set_status("waiting_input" if kind == "ask_human" else "waiting_permission")
        search_attributes.upsert_awaiting(kind)

    def _is_idle(self) -> bool:
        return self._status == "waiting_input" and self._active_turn is None

    def _permission_state(self) -> dict[str, Any]:
        if self._snapshot is None:
            return {}
        side = self._active_side or "a"
        prompt = self._snapshot.prompts[self._snapshot.agent.side(side).prompt]
        return read_models.permission_state(
            self._require_mem(), self._snapshot.agent.permissions, prompt.permissions
        )

    def _emit_snapshot(self) -> None:
        # The read model rides in the event stream, so the store can serve it once the
        # thread has closed and no worker can answer queries.
        read = self.thread_read().model_dump(mode="json", by_alias=True)
        self._require_mem().emit("snapshot.updated", {"kind": "thread_read", "threadRead": read})

    def apply_intents(self, intents: list[Intent]) -> None:
        """Apply ThreadState changes a tool asked for, after its result is persisted."""
        mem = self._require_mem()
        for intent in intents:
            parsed: QueuedMessage | QueuedTool | str
            if intent.kind == "queue_message":
                parsed = parse_single("queueMessage", [intent.data], QueuedMessage)
            elif intent.kind == "queue_tool":
                parsed = parse_single("queueTool", [intent.data], QueuedTool)
            elif intent.kind == "terminate":
                self.terminate(str(intent.data.get("reason") or "terminated by a tool"))
                continue
            else:
                mem.emit("thread.updated", {"statusNote": intent.data.get("status")})
                continue
            if isinstance(parsed, str):
                self._warn("malformed_intent", intent.kind, parsed)
            elif isinstance(parsed, QueuedMessage):
                self._queue_message(parsed)
            else:
                self._enqueue(
                    QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), tool=parsed)
                )

    def _queue_message(self, message: QueuedMessage) -> QueueEntry:
        mem = self._require_mem()
        entry = QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), message=message)
        self._enqueue(entry)
        return entry

    def _enqueue(self, entry: QueueEntry) -> None:
        mem = self._require_mem()
        mem.queue.append(entry)
        mem.emit(
            "queue.changed",
            {"action": "enqueued", "queueId": entry.queue_id, "queue": mem.queue_snapshot()},
            queue_id=entry.queue_id,
        )

    def _refuse_when_terminated(self, name: str) -> bool:
        if not self._terminated_at:
            return False
        self._warn(
            "after_terminate",
            name,
            f"thread was terminated at {self._terminated_at}; {name} ignored",
        )
        return True

    def _warn(self, code: str, signal: str, message: str) -> None:
        mem = self._require_mem()
        mem.warnings += 1
        mem.incident(code, message, signal=signal)
        workflow.logger.warning("%s (%s): %s", code, signal, message)
        mem.emit("runtime.warning", {"code": code, "signal": signal, "message": message})

    def _set_status(self, status: ThreadStatus) -> None:
        if status != self._status:
            self._status = status
            search_attributes.upsert_status(status)

    def thread_row(self) -> dict[str, Any]:
        """The store's row for this thread (its read-model summary)."""
        start, mem = self._require_start(), self._require_mem()
        return {
            "thread_id": mem.thread_id,
            "agent": start.agent,
            "status": self._status,
            "session_id": start.session_id,
            "user_id": start.user_id,
            "parent_thread_id": self._parent_id(),
            "stop_reason": self._stop_reason,
            "last_outcome": self._last_outcome,
            "usage": mem.usage.model_dump(by_alias=True),
        }

    def _parent_id(self) -> str | None:
        start = self._start
        return start.parent.thread_id if start and start.parent else None

    def _require_mem(self) -> ThreadMemory:
        if self._mem is None:
            raise ApplicationError("thread is not started yet", type="NotStarted")
        return self._mem

    def _require_snapshot(self) -> DefinitionSnapshot:
        if self._snapshot is None:
            raise ApplicationError("thread definitions are not loaded yet", type="NotStarted")
        return self._snapshot

    def _require_start(self) -> ThreadStartInput:
        if self._start is None:
            raise ApplicationError("thread is not started yet", type="NotStarted")
        return self._start


def _decode(args: Sequence[RawValue]) -> tuple[list[Any], str | None]:
    converter = workflow.payload_converter()
    values = []
    for i, raw in enumerate(args):
        try:
            values.append(converter.from_payload(raw.payload))
        except Exception as err:  # any undecodable payload is the sender's error
            return [], f"argument {i} is not valid JSON: {err}"
    return values, None


def _side_of(role: str) -> Side | None:
    # A queued assistant message speaks for side A (and so wakes side B); user and system
    # messages belong to no side, and every side sees them as what they are.
    return "a" if role == "assistant" else None


def _add_usage(mem: ThreadMemory, result: ModelCallResult) -> None:
    mem.usage.input_tokens += result.usage.input_tokens
    mem.usage.output_tokens += result.usage.output_tokens
    mem.usage.cached_tokens += result.usage.cached_tokens
    if result.cost_usd is not None:
        mem.usage.cost_usd = (mem.usage.cost_usd or 0.0) + result.cost_usd
    else:
        mem.cost_unknown = True


def _failure_text(err: BaseException) -> str:
    parts = []
    current: BaseException | None = err
    while current is not None:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__
    return ": ".join(p for p in parts if p)[:2000]


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
