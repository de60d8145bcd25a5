"""The AgentThread workflow: one agent thread, its lifecycle and its step cycle.

Signals, updates and queries live in `control_plane.py`, shared state and helpers in
`thread_base.py`; this module is the run loop.

The workflow id is the thread id. The step cycle follows Runtime §3; content lives in
the store and reaches Temporal history about once (a signal, an activity input or
result), so history grows linearly with the conversation.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from contract.activities import (
    ACTIVITY_MODEL_CALL,
    ACTIVITY_THREAD_INIT,
    ModelCallInput,
    ModelCallResult,
    ThreadInitInput,
    ThreadInitResult,
)
from contract.events import Event
from contract.messages import (
    Side,
)
from contract.thread import (
    WORKFLOW_TYPE,
    ThreadResult,
    ThreadStartInput,
    TurnCursor,
)
from contract.validation import describe_validation_error
from workflows import continuation, search_attributes
from workflows.control_plane import ControlPlane
from workflows.outbox import flush, persist_first
from workflows.payload_budget import encoded_size, megabytes
from workflows.stop_rules import (
    StepFacts,
    Stop,
    evaluate_step,
    session_status,
    session_turns_exhausted,
)
from workflows.thread_state import QueueEntry, ThreadMemory
from workflows.tool_runner import ToolRunner


@workflow.defn(name=WORKFLOW_TYPE)
class AgentThreadWorkflow(ControlPlane):
    """One Standard Agents thread, driven by queued messages, tools and terminate."""

    # ---- lifecycle -------------------------------------------------------------------

    @workflow.init
    def __init__(self, start: Any = None) -> None:
        # Everything handlers need is in place before any of them runs: signals that
        # arrived while the previous run continued as new come with this run's first task.
        super().__init__()
        self._start_error: ApplicationError | None = None
        try:
            self._start = ThreadStartInput.model_validate(start)
        except ValidationError as err:
            # The start input is validated here, not by the converter: a decode failure in
            # the converter would fail the workflow task forever instead of the thread.
            self._start_error = ApplicationError(
                f"invalid AgentThread start input: {describe_validation_error(err)}",
                type="InvalidStartInput",
                non_retryable=True,
            )
            return
        mem = self._mem = ThreadMemory(
            thread_id=workflow.info().workflow_id, session_id=self._start.session_id
        )
        if self._start.carry_over is not None:
            # A continued run: the same thread, so no new snapshot and no thread.started.
            continuation.restore(self, self._start.carry_over)
            return
        for message in self._start.messages:
            self._enqueue(
                QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), message=message)
            )
        mem.emit(
            "thread.started", {"agent": self._start.agent, "parentThreadId": self._parent_id()}
        )

    @workflow.run
    async def run(self, start: Any = None) -> ThreadResult:
        if self._start_error is not None:
            raise self._start_error
        mem, carried = self._require_mem(), self._require_start().carry_over
        if carried is None:
            await self._init()
        elif carried.turn is not None and not self._terminated_at:
            await self._run_session(resume=carried.turn)
        while not self._terminated_at:
            await self._continue_as_new_if_due(None)  # a safe point: idle
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
                scoped_env_request=start.scoped_env_request,
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
        await self.propagate_terminate()
        await self.finish_background()
        if self._is_child():
            await self._report("closed", status="terminated", content=self._terminate_reason)
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
            usage=self.total_usage(),
        )

    # ---- the session and its steps ---------------------------------------------------

    async def _run_session(self, resume: TurnCursor | None = None) -> None:
        """Run turns until the session stops; `resume` continues a turn of an earlier run."""
        mem = self._require_mem()
        side: Side = "a"
        stop: Stop | None = None
        if resume is not None:
            side, turn_id, resumed_steps = resume.side, resume.turn_id, resume.side_steps
        else:
            head = mem.queue[0]
            if (
                self._agent().type == "dual_ai"
                and head.message
                and head.message.role == "assistant"
            ):
                side = "b"
            turn_id, resumed_steps = head.turn_id, None
            mem.counters.session_steps = mem.counters.side_a_turns = 0
            mem.counters.side_b_turns = 0
            self._stop_reason = None
        self._set_status("running")
        while not self._terminated_at:
            stop = await self._run_turn(side, turn_id, resumed_steps)
            resumed_steps = None
            if stop is None or stop.scope == "session" or self._agent().type == "ai_human":
                break
            if session_turns_exhausted(
                self._agent(), mem.counters.side_a_turns, mem.counters.side_b_turns
            ):
                self._stop_reason = "max_session_turns"
                break
            side = "b" if side == "a" else "a"
            turn_id = mem.new_id("turn")
        mem.emit("thread.updated", {"status": "idle", "stopReason": self._stop_reason})
        self._active_turn = self._active_side = None
        await self.report_session_end(stop)
        if not self._terminated_at:
            self._set_status("waiting_input")
            self._emit_snapshot()
            await flush(mem, thread_row=self.thread_row())

    async def _run_turn(
        self, side: Side, turn_id: str, resumed_steps: int | None = None
    ) -> Stop | None:
        """Run steps of one side until a stop; None when the turn failed or was aborted.

        `resumed_steps` continues a turn the previous run began (and announced).
        """
        mem = self._require_mem()
        self._active_turn, self._active_side = turn_id, side
        if resumed_steps is None:
            mem.emit("turn.started", {"side": side}, turn_id=turn_id)
        side_steps = resumed_steps or 0
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
                # A safe point: between two steps, nothing in flight.
                await self._continue_as_new_if_due(
                    TurnCursor(side=side, turn_id=turn_id, side_steps=side_steps)
                )
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
        mem = self._require_mem()
        step_id = mem.new_id("step")
        new_messages = await self._drain_queue(side, turn_id, step_id)  # 1
        new_messages = await self.start_immediate(side, turn_id, new_messages)
        if self._terminated_at:
            return Stop("session", "aborted_by_user")
        if self._oversized:
            return self._refuse_oversized(new_messages, turn_id, step_id)
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
        side_cfg = self._agent().side(side)
        status = session_status(side_cfg, outcomes)
        if status is not None and not self._relay_to_parent("set_status", status):
            mem.emit("thread.updated", {"statusNote": status}, turn_id=turn_id, step_id=step_id)
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
        budget = self._require_start().options.payload_budget_bytes
        while mem.queue:
            entry = mem.queue.popleft()
            if entry.message is not None and encoded_size(entry.message) > budget:
                # Only the start input or a tool's intent can bring one (signals are
                # checked on arrival): refuse it rather than schedule it.
                self._oversized.append(
                    f"queued message {entry.queue_id} (turn {entry.turn_id}, role "
                    f"{entry.message.role}) is {megabytes(encoded_size(entry.message))} "
                    f"encoded, over the thread's payload budget of {megabytes(budget)}; "
                    "it was not sent to the model (upload large content as an attachment)"
                )
            elif entry.message is not None:
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
        prompt = self._active_prompt(side)
        candidates = [prompt.model, *snapshot.models[prompt.model].fallbacks]
        message_id, position = mem.new_id("msg"), mem.reserve_position()
        new_messages = [*mem.take_outbox_messages(), *new_messages]
        last_error = "no model was tried"
        for model_name in candidates:
            outbox = mem.take_outbox()
            call = ModelCallInput(
                thread_id=mem.thread_id,
                session_id=mem.session_id,
                snapshot_id=snapshot.snapshot_id,
                side=side,
                model=model_name,
                agent=self._active_agent,
                turn_id=turn_id,
                step_id=step_id,
                step=mem.counters.steps,
                assistant_message_id=message_id,
                assistant_position=position,
                new_messages=new_messages,
                outbox=outbox,
            )
            if encoded_size(call) > start.options.payload_budget_bytes:
                # Many large queued messages at once: write them with the local flush
                # (whose input never reaches history), then call the model with ids only.
                await persist_first(mem, outbox, new_messages)
                new_messages, outbox = [], []
                call = call.model_copy(update={"new_messages": [], "outbox": []})
            self._in_flight = workflow.start_activity(
                ACTIVITY_MODEL_CALL,
                call,
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

    def _refuse_oversized(self, drained: list[Any], turn_id: str, step_id: str) -> Stop:
        """End the turn with step_error naming the queued messages too big to schedule."""
        mem = self._require_mem()
        mem.outbox_messages.extend(drained)  # the others are kept, in order
        text = "; ".join(self._oversized)
        self._oversized = []
        self._stop_reason, self._last_outcome = "step_error", text
        mem.incident("payload_too_large", text, turn_id=turn_id, step_id=step_id)
        mem.emit(
            "runtime.warning",
            {"code": "payload_too_large", "message": text},
            turn_id=turn_id,
            step_id=step_id,
        )
        return Stop("session", "step_error")

    # ---- continue-as-new -------------------------------------------------------------

    async def _continue_as_new_if_due(self, turn: TurnCursor | None) -> None:
        """Continue as new when this run's history is long; called at safe points only."""
        start, mem = self._require_start(), self._require_mem()
        if self._terminated_at or mem.pending_actions or self._background_busy():
            return
        if not continuation.history_is_long(start.options):
            return
        if not workflow.patched(continuation.PATCH_ID):
            return  # a history from before continue-as-new existed
        announced = False
        while True:
            await workflow.wait_condition(workflow.all_handlers_finished)
            if self._terminated_at:
                return
            carried = continuation.carry_over(self, turn)
            next_input = start.model_copy(update={"carry_over": carried, "messages": []})
            size = encoded_size(next_input)
            if size > start.options.payload_budget_bytes:
                # Heavy queued messages: the next step drains them into the store first.
                mem.incident("continue_as_new_postponed", f"carry-over is {size} bytes")
                return
            if announced and not mem.outbox and not mem.outbox_messages:
                break
            if not announced:
                info = workflow.info()
                mem.emit(
                    "thread.updated",
                    {
                        "continuedAsNew": {
                            "nextRun": carried.counters.runs,
                            "historyEvents": info.get_current_history_length(),
                            "historyBytes": info.get_current_history_size(),
                            "carryOverBytes": size,
                        }
                    },
                )
                announced = True
            # Every event and message reaches the store before this run ends.
            await flush(mem, thread_row=self.thread_row())
        workflow.continue_as_new(next_input)

    # ---- helpers ---------------------------------------------------------------------

    @property
    def _tools(self) -> ToolRunner:
        return ToolRunner(
            self._require_mem(),
            self._require_snapshot(),
            self._require_start().options,
            self,
            agent=self._active_agent,
        )


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
