"""The AgentThread workflow: one agent thread, its lifecycle and its step cycle.

The workflow id is the thread id. This class holds the thread's one state object
(`ThreadMemory`), its Temporal handlers and its lifecycle; the session/turn/step loop of
Runtime §3 and every other part are collaborators built by `thread_parts.build_parts`
(see ARCHITECTURE.md). Content lives in the store and reaches Temporal history about once
(a signal, an activity input or result), so history grows linearly with the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from weft.contract.actions import UPDATE_RESPOND_ACTION_CHECKED, ActionKind, RespondActionResult
from weft.contract.activities import Intent, ToolResult
from weft.contract.context import QUERY_CONTEXT_BOUNDARY
from weft.contract.definitions import ToolSpec
from weft.contract.inventory import (
    QUERY_EXECUTION_ENVIRONMENT,
    QUERY_TOOL_INVENTORY,
    ExecutionEnvironment,
    ToolInventory,
)
from weft.contract.mcp import QUERY_MCP_ELICITATION, ElicitationAnswer
from weft.contract.messages import (
    InterruptTurnResult,
    MessagePage,
    Side,
    SubmitTurnResult,
    ToolCall,
)
from weft.contract.thread import (
    QUERY_MESSAGES,
    QUERY_SESSION_SNAPSHOT,
    QUERY_THREAD_READ,
    SIGNAL_TERMINATE,
    UPDATE_INTERRUPT_TURN,
    UPDATE_SUBMIT_TURN,
    WORKFLOW_TYPE,
    ThreadRead,
    ThreadResult,
    ThreadStartInput,
    ThreadStatus,
    session_status,
)
from weft.contract.validation import describe_validation_error
from weft.workflows import inventory, read_models, search_attributes
from weft.workflows.continuation import restore, store_carried
from weft.workflows.control_plane import refused_after_terminate
from weft.workflows.read_facts import session_facts
from weft.workflows.subagents.spawner import CHILD_ID_PATCH
from weft.workflows.thread_init import init_thread
from weft.workflows.thread_parts import build_parts
from weft.workflows.thread_state import ThreadMemory

# Facts are written only once true: the next run records a continue-as-new,
# an idle thread writes a refused signal's warning at once, the close writes what late
# handlers produced, and terminate waits for a cancelled tool call to stop. Asked once,
# in the run's first activation (as the history gauge's patch is, for the same reason).
TRUTHFUL_LOG_PATCH = "truthful-log-v1"


# Pinned on a versioned worker (its default behaviour, workers/deployment.py; declared here,
# Temporal would refuse every task of an unversioned worker): a run never changes code under
# its feet, and moves to the deployment's current version at an idle continue-as-new.
@workflow.defn(name=WORKFLOW_TYPE)
class AgentThreadWorkflow:
    """One Standard Agents thread, driven by queued messages, tools and terminate."""

    @workflow.init
    def __init__(self, start: Any = None) -> None:
        # Everything handlers need is in place before any of them runs: signals that
        # arrived while the previous run continued as new come with this run's first task.
        self._start_error: ApplicationError | None = None
        try:
            valid = ThreadStartInput.model_validate(start)
        except ValidationError as err:
            # The start input is validated here, not by the converter: a decode failure in
            # the converter would fail the workflow task forever instead of the thread.
            self._start_error = ApplicationError(
                f"invalid AgentThread start input: {describe_validation_error(err)}",
                type="InvalidStartInput",
                non_retryable=True,
            )
            # A placeholder keeps the state non-optional: `run` fails the thread at once,
            # and handlers refuse or ignore what arrives meanwhile.
            valid = ThreadStartInput(agent="(invalid start input)")
        thread_id = workflow.info().workflow_id
        carried = valid.carry_over
        mem = self._mem = (
            restore(thread_id, valid, carried)
            if carried is not None
            else ThreadMemory(thread_id=thread_id, start=valid)
        )
        self._parts = build_parts(mem, self, refuse_if_not_started=self._refuse_if_not_started)
        # A root thread's status is its session's (`session.updated`); fixed for the run.
        self._root = mem.parent_id is None
        if carried is None and self._start_error is None:
            for message in valid.messages:
                self._parts.queue.add_message(message)
            mem.emit("thread.started", {"agent": valid.agent, "parentThreadId": mem.parent_id})

    # ---- Temporal handlers: the control plane and the read models --------------------

    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Every signal lands here so a malformed payload can never fail a workflow task."""
        if self._start_error is None:
            self._parts.control.signal(name, args)

    @workflow.update(name=UPDATE_SUBMIT_TURN)
    async def submit_turn(self, payload: Any = None) -> SubmitTurnResult:
        """Queue a message and say whether it starts a turn now, waits, or is refused."""
        return await self._parts.control.submit_turn(payload)

    @submit_turn.validator
    def _validate_submit_turn(self, payload: Any = None) -> None:
        self._refuse_if_not_started()
        self._parts.control.validate_submit_turn(payload)

    @workflow.update(name=UPDATE_INTERRUPT_TURN)
    async def interrupt_turn(self, payload: Any = None) -> InterruptTurnResult:
        """Stop the running turn without a new message; the thread stays open (001)."""
        return self._parts.control.interrupt_turn(payload)

    @interrupt_turn.validator
    def _validate_interrupt_turn(self, payload: Any = None) -> None:
        self._refuse_if_not_started()
        self._parts.control.validate_interrupt_turn(payload)

    @workflow.update(name=UPDATE_RESPOND_ACTION_CHECKED)
    async def respond_action_checked(self, payload: Any = None) -> RespondActionResult:
        """Answer a pending action; the validator refuses what the signal would only warn."""
        return self._parts.control.respond_action(payload)

    @respond_action_checked.validator
    def _validate_respond_action(self, payload: Any = None) -> None:
        self._refuse_if_not_started()
        self._parts.control.validate_respond_action(payload)

    @workflow.query(name=QUERY_THREAD_READ)
    def thread_read(self) -> ThreadRead:
        """The thread read model: status, active turn, pending actions, queue, outcome."""
        self._refuse_if_not_started()
        return read_models.thread_read(self._mem)

    @workflow.query(name=QUERY_SESSION_SNAPSHOT)
    def session_snapshot(self, page: Any = None) -> dict[str, Any]:
        """The Agent Runtime session snapshot: the shell and a recent window of messages."""
        return read_models.snapshot_window(self._mem, self.thread_read(), page)

    @workflow.query(name=QUERY_CONTEXT_BOUNDARY)
    def context_boundary_snapshot(self) -> dict[str, Any]:
        """The Agent Runtime `context_boundary_snapshot`: the boundary in force and its summary."""
        self._refuse_if_not_started()
        return read_models.context_snapshot(self._mem)

    @workflow.query(name=QUERY_TOOL_INVENTORY)
    def tool_inventory(self) -> ToolInventory:
        """The `tool_inventory_snapshot`: the active side's tools, permissions and sources."""
        self._refuse_if_not_started()
        return inventory.tool_inventory(self._mem)

    @workflow.query(name=QUERY_EXECUTION_ENVIRONMENT)
    def execution_environment(self) -> ExecutionEnvironment:
        """The `execution_environment_snapshot`: env names, filesystem, limits, processes."""
        self._refuse_if_not_started()
        return inventory.execution_environment(self._mem)

    @workflow.query(name=QUERY_MCP_ELICITATION)
    def mcp_elicitation_answer(self, action_id: Any = None) -> ElicitationAnswer | None:
        """How a person answered an MCP server's elicitation; None while they may still.

        Polled by the `tool.call` activity whose server asked (`workflows/mcp_tools.py`).
        """
        return self._parts.mcp.answer(action_id) if isinstance(action_id, str) else None

    @workflow.query(name=QUERY_MESSAGES)
    def messages(self, page: Any = None) -> MessagePage:
        """Message metadata from `cursor` (a position), at most `limit` of them."""
        self._refuse_if_not_started()
        return read_models.message_page(self._mem, page)

    # ---- lifecycle -------------------------------------------------------------------

    @workflow.run
    async def run(self, start: Any = None) -> ThreadResult:
        if self._start_error is not None:
            raise self._start_error
        mem, carried = self._mem, self._mem.start.carry_over
        mem.history.start()  # first: see workflows/history_gauge.py
        # Asked once per run, before any command of the run: see `TRUTHFUL_LOG_PATCH`.
        mem.truthful_log = workflow.patched(TRUTHFUL_LOG_PATCH)
        mem.readable_child_ids = workflow.patched(CHILD_ID_PATCH)
        definitions = self._parts.definitions
        definitions.start_run()  # asks its patch: before any command too
        continuation, idle = self._parts.continuation, self._parts.idle
        idle.start_run()  # the same
        effects = self._parts.effects
        if carried is None:
            await init_thread(self._mem, self.set_status)
            definitions.started()
        else:
            effects.restart_timers()
            await store_carried(mem, self._parts.outbox)
            if carried.turn is not None and not mem.is_terminated():
                await self._parts.session.run(resume=carried.turn)
        while not mem.is_terminated():
            await continuation.continue_if_due(None)  # a safe point: idle
            idle.began()
            await workflow.wait_condition(lambda: self._has_idle_work() or idle.due)
            idle.ended()
            if idle.take_due() and not self._has_idle_work():
                # Quiet for a while: shed this run's history, so a wake replays little.
                await continuation.continue_if_due(None, idle=True)
                continue
            if mem.is_terminated():
                break
            if effects.has_due():  # an effect's alarm fired (Runtime §2, the fourth trigger)
                await effects.run_due()
            queued = bool(self._parts.queue)
            resumed = None if queued else self._parts.budget.take_resume()
            if queued or resumed is not None:
                if resumed is None:  # a new session: the turn boundary for definitions
                    await definitions.at_turn_boundary()
                await self._parts.session.run(resume=resumed)
            else:
                if definitions.upgrade_waiting():
                    await definitions.at_turn_boundary()
                if self._parts.context.requested():  # a `compact` signal while idle
                    await self._parts.context.compact_idle()
                # What an effect, or a schedule from outside, produced reaches the store now.
                effects.changed = False
                await self._parts.outbox.flush()
        return await self._close()

    def _has_idle_work(self) -> bool:
        """Whether something wakes the idle thread."""
        parts, mem = self._parts, self._mem
        return (
            bool(parts.queue)
            or mem.is_terminated()
            or parts.context.requested()
            or parts.effects.has_due()
            or parts.effects.changed
            or parts.budget.resume_requested
            # A fact produced while idle (a refused signal's warning) is written when it
            # happens, not with the next turn.
            or (mem.truthful_log and bool(mem.outbox))
            # A new target version of the worker deployment: move at once.
            or parts.continuation.upgrade_ready()
            # `upgrade_definitions` while idle: move now, not at the next turn.
            or parts.definitions.upgrade_waiting()
        )

    async def _close(self) -> ThreadResult:
        mem = self._mem
        self.set_status("cancelled")
        await self._parts.registry.propagate_terminate()
        await self._parts.background.finish()
        if self._parts.reporter.is_child():
            await self._parts.reporter.report(
                "closed", status="terminated", content=mem.terminate_reason
            )
        inventory.emit_snapshots(mem)  # before the thread read: that one announces the close
        self.emit_snapshot()
        await self._parts.outbox.flush(with_thread_row=True)
        await workflow.wait_condition(workflow.all_handlers_finished)
        if mem.truthful_log and (mem.outbox or mem.outbox_messages):
            # What handlers produced after that write (a late signal's warning) is a fact
            # too. A signal that arrives even later makes Temporal refuse this completion,
            # so the replayed run writes it here.
            await self._parts.outbox.flush()
        return ThreadResult(
            thread_id=mem.thread_id,
            status=mem.status,
            stop_reason=mem.stop_reason,
            terminated_at=mem.terminated_at,
            reason=mem.terminate_reason,
            counters=mem.counters,
            usage=mem.total_usage(),
        )

    def terminate(self, reason: str | None) -> None:
        """Soft shutdown (Runtime §10): stamp, abort in-flight work, refuse new work."""
        mem = self._mem
        if refused_after_terminate(mem, SIGNAL_TERMINATE):
            return
        mem.terminated_at = mem.timestamp()
        mem.terminate_reason = reason
        mem.emit(
            "thread.updated",
            {
                "status": "cancelled",
                "terminatedAt": mem.terminated_at,
                "reason": reason,
                **session_facts(mem),
            },
        )
        self._parts.effects.cancel_all("thread terminated")
        self._parts.in_flight.cancel()

    # ---- what collaborators ask of the thread (their host protocols) -----------------

    async def run_agent_tool(
        self, call: ToolCall, spec: ToolSpec, *, side: Side, turn_id: str, step_id: str
    ) -> ToolResult:
        return await self._parts.agent_tools.run(
            call, spec, side=side, turn_id=turn_id, step_id=step_id
        )

    def apply_intents(self, intents: list[Intent]) -> None:
        self._parts.control.apply_intents(intents)

    def set_waiting(self, kind: ActionKind | None) -> None:
        """Show that the thread waits on a human (status and search attribute), or not."""
        if kind is None:
            self.set_status("running")
        else:
            asks_input = kind in ("ask_human", "elicitation")
            self.set_status("waiting_input" if asks_input else "waiting_permission")
        search_attributes.upsert_awaiting(kind)

    def turn_interrupted(self) -> bool:
        return self._parts.in_flight.turn_stop is not None

    # ---- helpers ---------------------------------------------------------------------

    def set_status(self, status: ThreadStatus) -> None:
        """The thread's status, its search attribute and, for a root, `session.updated`."""
        mem = self._mem
        if status != mem.status:
            mem.status = status
            search_attributes.upsert_status(status)
            shown = session_status(status, mem.active_turn is not None)
            if mem.truthful_log and self._root and shown is not None:
                mem.emit("session.updated", {"status": shown, "threadStatus": status})

    def emit_snapshot(self) -> None:
        # The read model rides in the event stream, so the store can serve it once the
        # thread has closed and no worker can answer queries.
        read = self.thread_read().model_dump(mode="json", by_alias=True)
        self._mem.emit("snapshot.updated", {"kind": "thread_read", "threadRead": read})

    def _refuse_if_not_started(self) -> None:
        if self._start_error is not None:
            raise ApplicationError(
                f"thread could not start: {self._start_error.message}", type="NotStarted"
            )
