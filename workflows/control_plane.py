"""The AgentThread control plane: what signals, updates and tool intents ask of a thread.

Every signal reaches `ControlPlane.signal` through one dynamic handler that decodes and
validates payloads, so a malformed one becomes a `runtime.warning` and never fails a
workflow task. Updates are checked by validators that refuse what a signal would only warn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from weft.contract.actions import (
    SIGNAL_RESPOND_ACTION,
    UPDATE_RESPOND_ACTION_CHECKED,
    ActionResponse,
    RespondActionResult,
)
from weft.contract.activities import Intent
from weft.contract.context import SIGNAL_COMPACT, CompactRequest
from weft.contract.messages import (
    InterruptTurnRequest,
    InterruptTurnResult,
    QueuedMessage,
    QueuedTool,
    QueuedTurnRef,
    Side,
    SubmitTurnRequest,
    SubmitTurnResult,
    TerminateRequest,
)
from weft.contract.subagents import (
    SIGNAL_SUBAGENT_REPORT,
    SIGNAL_VARIABLES_PROVIDED,
    SubagentReport,
    VariablesProvided,
)
from weft.contract.thread import (
    SIGNAL_INTERRUPT_TURN,
    SIGNAL_PROMOTE_QUEUED_TURN,
    SIGNAL_QUEUE_MESSAGE,
    SIGNAL_QUEUE_TOOL,
    SIGNAL_REMOVE_QUEUED_TURN,
    SIGNAL_TERMINATE,
    UPDATE_INTERRUPT_TURN,
    UPDATE_SUBMIT_TURN,
)
from weft.workflows.action_answers import (
    AnswersView,
    UnanswerableAction,
    apply_response,
    check_response,
)
from weft.workflows.context_keeper import ContextKeeper
from weft.workflows.control import InvalidPayload, parse_single, parse_update
from weft.workflows.in_flight import InFlight
from weft.workflows.payload_size import encoded_size, megabytes
from weft.workflows.queue import ThreadQueue, UnknownQueuedTurn
from weft.workflows.stop_rules import Stop
from weft.workflows.subagents.parent_reporter import ParentReporter
from weft.workflows.subagents.registry import SubagentRegistry, UnknownChild
from weft.workflows.subagents.spawner import SubagentSpawner, UnknownVariableRequest
from weft.workflows.turn_interrupt import InterruptView, TurnInterrupts
from weft.workflows.turn_waiters import TurnWaiters, WaitersView, current_update_id
from weft.workflows.views import Identity, Terminated


class PayloadTooLarge(Exception):
    """A payload the thread could not schedule (over its payload budget)."""


class ControlHost(Protocol):
    """What the control plane needs from the workflow."""

    def terminate(self, reason: str | None) -> None:
        """Soft shutdown (Runtime §10)."""


class ControlView(InterruptView, Terminated, Identity, WaitersView, AnswersView, Protocol):
    """What the control plane reads of the thread, with the views of the parts it holds
    (turn waiters and interrupts) and of the answers it records."""

    def is_idle(self) -> bool: ...


class ControlPlane:
    """Turns signals, updates and intents into changes of the thread, or into warnings."""

    def __init__(
        self,
        mem: ControlView,
        queue: ThreadQueue,
        in_flight: InFlight,
        registry: SubagentRegistry,
        spawner: SubagentSpawner,
        reporter: ParentReporter,
        context: ContextKeeper,
        host: ControlHost,
    ) -> None:
        self._mem = mem
        self._queue = queue
        self._in_flight = in_flight
        self._registry = registry
        self._spawner = spawner
        self._reporter = reporter
        self._context = context
        self._host = host
        self._waiters = TurnWaiters(mem)
        self._interrupts = TurnInterrupts(mem, in_flight)
        self._handlers: dict[str, Callable[[str, list[Any]], None]] = {
            SIGNAL_QUEUE_MESSAGE: self._queue_message,
            SIGNAL_QUEUE_TOOL: self._queue_tool,
            SIGNAL_TERMINATE: self._terminate,
            SIGNAL_RESPOND_ACTION: self._respond_action,
            SIGNAL_REMOVE_QUEUED_TURN: self._edit_queue,
            SIGNAL_PROMOTE_QUEUED_TURN: self._edit_queue,
            SIGNAL_SUBAGENT_REPORT: self._subagent_report,
            SIGNAL_VARIABLES_PROVIDED: self._variables_provided,
            SIGNAL_COMPACT: self._compact,
            SIGNAL_INTERRUPT_TURN: self._interrupt_signal,
        }
        self._intent_handlers: dict[str, Callable[[Intent], None]] = {
            "queue_message": self._queue_message_intent,
            "queue_tool": self._queue_tool_intent,
            "terminate": self._terminate_intent,
            "compact": self._compact_intent,
        }

    # ---- signals ---------------------------------------------------------------------

    def handle_signals(self, handlers: dict[str, Callable[[str, list[Any]], None]]) -> None:
        """Let a collaborator take signals of its own (decoded; `InvalidPayload` warns)."""
        self._handlers.update(handlers)

    def signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Handle any signal; whatever is wrong with it becomes a warning."""
        handler = self._handlers.get(name)
        try:
            values = _decode(args)
            if handler is None:
                self._mem.warn(
                    "unknown_signal",
                    name,
                    f"no signal named {name!r}; known: {', '.join(self._handlers)}",
                )
                return
            handler(name, values)
        except InvalidPayload as err:
            self._mem.warn("malformed_signal", name, str(err))
        except PayloadTooLarge as err:
            self._mem.warn("payload_too_large", name, str(err))

    def _queue_message(self, name: str, values: list[Any]) -> None:
        message = parse_single(name, values, QueuedMessage)
        if not refused_after_terminate(self._mem, name):
            self._check_size(name, message)
            self._queue.add_message(message, source=name, measured=True)

    def _queue_tool(self, name: str, values: list[Any]) -> None:
        tool = parse_single(name, values, QueuedTool)
        self._check_size(name, tool)
        if not refused_after_terminate(self._mem, name):
            self._queue.add_tool(tool)

    def _terminate(self, name: str, values: list[Any]) -> None:
        # terminate accepts no payload at all, as well as {reason}. A malformed one is still
        # obeyed, with a warning: an operator's stop must win.
        try:
            request = parse_single(name, values, TerminateRequest) if values else None
        except InvalidPayload as err:
            self._mem.warn("malformed_signal", name, str(err))
            request = TerminateRequest(reason="terminate signal with a malformed payload")
        self._host.terminate((request or TerminateRequest()).reason)

    def _respond_action(self, name: str, values: list[Any]) -> None:
        response = parse_single(name, values, ActionResponse)
        try:
            check_response(self._mem, response)
        except UnanswerableAction as err:
            self._mem.warn("unanswerable_action", name, str(err))
            return
        apply_response(self._mem, response)

    def _edit_queue(self, name: str, values: list[Any]) -> None:
        ref = parse_single(name, values, QueuedTurnRef)
        try:
            if name == SIGNAL_REMOVE_QUEUED_TURN:
                self._queue.remove(ref.queue_id)
            else:
                self._queue.promote(ref.queue_id)
        except UnknownQueuedTurn as err:
            self._mem.warn("unknown_queued_turn", name, str(err))

    def _subagent_report(self, name: str, values: list[Any]) -> None:
        report = parse_single(name, values, SubagentReport)
        try:
            self._registry.receive(report)
        except UnknownChild as err:
            self._mem.warn("unknown_subagent", name, str(err))

    def _variables_provided(self, name: str, values: list[Any]) -> None:
        provided = parse_single(name, values, VariablesProvided)
        try:
            deferred = self._spawner.take_deferred(provided)
        except UnknownVariableRequest as err:
            self._mem.warn("unknown_variable_request", name, str(err))
            return
        if not refused_after_terminate(self._mem, name):
            self._spawner.boot_later(deferred)

    def _compact(self, name: str, values: list[Any]) -> None:
        # Like terminate, compact takes no payload at all as well as {reason}.
        request = parse_single(name, values, CompactRequest) if values else CompactRequest()
        if not refused_after_terminate(self._mem, name):
            self._context.request("requested", request.reason)

    def _interrupt_signal(self, name: str, values: list[Any]) -> None:
        # Like terminate and compact, no payload at all is {} (stop whatever runs).
        request = parse_single(name, values, InterruptTurnRequest) if values else None
        request = request or InterruptTurnRequest()
        if request.session_id not in (None, self._mem.session_id):
            raise InvalidPayload(self._wrong_session(request.session_id))
        if refused_after_terminate(self._mem, name):
            return
        result = self.interrupt(request)
        if result.status == "noop":
            self._mem.warn("interrupt_noop", name, result.reason or "nothing to interrupt")

    # ---- updates ---------------------------------------------------------------------

    def validate_submit_turn(self, payload: Any) -> None:
        """Refuse a turn the thread cannot take, before it reaches history."""
        mem = self._mem
        if mem.is_terminated():
            raise ApplicationError(
                f"thread {mem.thread_id} was terminated at {mem.terminated_at}"
                " and accepts no more turns",
                type="ThreadTerminated",
            )
        request = parse_update(UPDATE_SUBMIT_TURN, payload, SubmitTurnRequest)
        try:
            self._check_size(UPDATE_SUBMIT_TURN, request)
        except PayloadTooLarge as err:
            raise ApplicationError(str(err), type="PayloadTooLarge", non_retryable=True) from None

    async def submit_turn(self, payload: Any) -> SubmitTurnResult:
        """Queue a message and say whether it starts a turn now, waits, or is refused.

        With `wait: "completed"` it returns when that turn ends (workflows/turn_waiters.py).
        """
        request = SubmitTurnRequest.model_validate(payload)
        waits = request.wait == "completed"
        update_id = current_update_id()
        known = self._waiters.known(update_id) if waits else None
        if known is not None:
            return known
        idle = self._mem.is_idle() and not self._queue
        if request.policy == "reject" and not idle:
            rejected = self._queue.reject()
            return self._waiters.refused(update_id, rejected) if waits else rejected
        entry = self._queue.add_message(
            request.message(), source=UPDATE_SUBMIT_TURN, policy=request.policy
        )
        if request.policy == "interrupt" and self._in_flight.interrupt_model():
            self._queue.interrupted(entry)
        status = "accepted" if idle else "queued"
        result = SubmitTurnResult(turn_id=entry.turn_id, status=status, queue_id=entry.queue_id)
        return await self._waiters.wait(update_id, entry, result) if waits else result

    def validate_interrupt_turn(self, payload: Any) -> None:
        """Refuse a malformed `interrupt_turn`, or one addressed to another session."""
        request = parse_update(UPDATE_INTERRUPT_TURN, payload or {}, InterruptTurnRequest)
        if request.session_id not in (None, self._mem.session_id):
            raise ApplicationError(self._wrong_session(request.session_id), type="InvalidPayload")

    def interrupt_turn(self, payload: Any) -> InterruptTurnResult:
        """Stop the running turn (already checked by the validator), or say it is a no-op."""
        return self.interrupt(InterruptTurnRequest.model_validate(payload or {}))

    def interrupt(self, request: InterruptTurnRequest) -> InterruptTurnResult:
        """001's `interrupt_turn` (workflows/turn_interrupt.py)."""
        return self._interrupts.interrupt(request)

    def end_interrupted_turn(self, side: Side, turn_id: str) -> Stop | None:
        """End the running turn `interrupted` when an interrupt stands against it."""
        return self._interrupts.end_turn(side, turn_id)

    def _wrong_session(self, session_id: str | None) -> str:
        return (
            f"interrupt_turn.sessionId {session_id!r} is not this thread's session "
            f"({self._mem.session_id!r})"
        )

    def validate_respond_action(self, payload: Any) -> None:
        response = parse_update(UPDATE_RESPOND_ACTION_CHECKED, payload, ActionResponse)
        try:
            check_response(self._mem, response)
        except UnanswerableAction as err:
            raise ApplicationError(
                str(err), {"reason": err.reason}, type="UnanswerableAction"
            ) from None

    def respond_action(self, payload: Any) -> RespondActionResult:
        """Answer a pending action (already checked by the validator)."""
        response = ActionResponse.model_validate(payload)
        apply_response(self._mem, response)
        return RespondActionResult(action_id=response.action_id, decision=response.decision)

    # ---- intents: ThreadState changes a tool asked for --------------------------------

    def handle_intents(self, handlers: dict[str, Callable[[Intent], None]]) -> None:
        """Let a collaborator apply the intents of its kinds (effects, transcript edits).

        A handler raises `InvalidPayload` for an intent it cannot apply; that becomes a
        `runtime.warning`, like a malformed signal.
        """
        self._intent_handlers.update(handlers)

    def apply_intents(self, intents: list[Intent]) -> None:
        """Apply a tool's (or an effect's) intents, after its result is persisted."""
        for intent in intents:
            name = f"{intent.kind} intent"
            handler = self._intent_handlers.get(intent.kind, self._relay_intent)
            try:
                handler(intent)
            except InvalidPayload as err:
                self._mem.warn("malformed_intent", intent.kind, str(err))
            except PayloadTooLarge as err:
                self._mem.warn("payload_too_large", name, str(err))

    def _queue_message_intent(self, intent: Intent) -> None:
        message = parse_single("queueMessage", [intent.data], QueuedMessage)
        self._check_size(f"{intent.kind} intent", message)
        self._queue.add_message(message, source="queue_message_intent", measured=True)

    def _queue_tool_intent(self, intent: Intent) -> None:
        tool = parse_single("queueTool", [intent.data], QueuedTool)
        self._check_size(f"{intent.kind} intent", tool)
        self._queue.add_tool(tool)

    def _terminate_intent(self, intent: Intent) -> None:
        self._host.terminate(str(intent.data.get("reason") or "terminated by a tool"))

    def _compact_intent(self, intent: Intent) -> None:
        reason = intent.data.get("reason")
        self._context.request("tool", None if reason is None else str(reason))

    def _relay_intent(self, intent: Intent) -> None:
        # set_status and notify_parent: a status note for the parent, or an event.
        text = intent.data.get("status") or intent.data.get("content")
        self.relay_status(intent.kind, None if text is None else str(text))

    def relay_status(self, kind: str, text: str | None, **ids: Any) -> None:
        """A status note (or notify_parent): to the parent for a child, else an event."""
        if not self._reporter.relay(kind, text):
            self._mem.emit("thread.updated", {"statusNote": text}, **ids)

    # ---- guards ----------------------------------------------------------------------

    def _check_size(self, name: str, payload: BaseModel) -> None:
        budget = self._mem.start.options.payload_budget_bytes
        size = encoded_size(payload)
        if size > budget:
            raise PayloadTooLarge(
                f"{name} payload is {megabytes(size)} encoded, over the thread's payload "
                f"budget of {megabytes(budget)} (Temporal refuses payloads over 2 MB); "
                "upload large content as an attachment"
            )


def refused_after_terminate(mem: Terminated, name: str) -> bool:
    """Warn and return True when the thread is terminated and `name` must be ignored."""
    if mem.terminated_at is None:  # the stamp this warning states
        return False
    mem.warn(
        "after_terminate", name, f"thread was terminated at {mem.terminated_at}; {name} ignored"
    )
    return True


def _decode(args: Sequence[RawValue]) -> list[Any]:
    converter = workflow.payload_converter()
    values = []
    for i, raw in enumerate(args):
        try:
            values.append(converter.from_payload(raw.payload))
        except Exception as err:  # any undecodable payload is the sender's error
            raise InvalidPayload(f"argument {i} is not valid JSON: {err}") from None
    return values
