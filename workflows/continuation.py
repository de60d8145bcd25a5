"""Continue-as-new: when a run has grown enough, and what it carries into the next run.

A run continues as new only at a safe point (idle, or between two steps of a turn), after
every handler has finished, with the outbox flushed and nothing waiting on a human. What
signals add to the outbox during that last write is carried, and the next run stores it
first (`store_carried`).
A `submit_turn` that waits for its turn (`wait: "completed"`) finishes only when the turn
ends, which needs this run to go on: while one is pending the run does not continue as new
(it would otherwise wait for that handler for ever), and tries again at the next safe point.
`ThreadMemory` moves whole (less the older message index) into `ThreadCarryOver`, each
part's state as it is (contract/carry_parts.py); content stays in the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.workflow import ContinueAsNewVersioningBehavior

from weft.contract.context_state import ContextState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.deploys import REASON_VERSION_CHANGED, SIGNAL_UPGRADE_CHECK
from weft.contract.thread import (
    REASON_IDLE,
    ContinuedFrom,
    ThreadCarryOver,
    ThreadStartInput,
    TurnCursor,
)
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.background import BackgroundTasks
from weft.workflows.history_gauge import live_reading
from weft.workflows.outbox import Outbox
from weft.workflows.payload_size import encoded_size
from weft.workflows.thread_state import (
    Context,
    ThreadMemory,
    WorkflowContext,
)
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.turn_book import TurnBook

# The patch that introduced continue-as-new: histories recorded before it never continue.
PATCH_ID = "continue-as-new-v1"
# The patch that makes a regular activity the last wait before continuing (`outbox.settle`).
SETTLE_PATCH = "continue-as-new-settle-v1"
# The patch that lets a pinned run continue as new onto its deployment's new target version.
UPGRADE_PATCH = "deployment-upgrade-v1"
# The message index carried into the next run: the `messages` query pages through this
# recent window; older metadata (and all content) is read from the store.
CARRIED_INDEX = 500


class Continuation:
    """Decides when a run continues as new, and hands the thread over to the next run."""

    def __init__(
        self, mem: ThreadMemory, agents: ActiveAgent, background: BackgroundTasks, outbox: Outbox
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._agents = agents
        self._background = background
        # An upgrade this run tried and could not make (a waiter arrived, the carry-over is
        # too heavy): the idle loop must not wake for it again until something else happens.
        self._upgrade_blocked = False

    def signal_handlers(self) -> dict[str, Callable[[str, list[Any]], None]]:
        """`upgrade_check` wakes the thread and reads the history gauge: a signal comes in
        a workflow task's first activation, where every replay reads the same."""
        return {SIGNAL_UPGRADE_CHECK: lambda _name, _values: self._mem.history.read()}

    def upgrade_ready(self) -> bool:
        """Whether an idle run should wake to move to its deployment's new target version.

        Read from the history gauge, never live: an activation that resumes the run after a
        local activity can see a later workflow task's flags than its replay does (see
        workflows/history_gauge.py). An unversioned run never sees the change.
        """
        return (
            not self._upgrade_blocked
            and self._mem.history.last.target_changed
            and self._may_continue()
        )

    def _may_continue(self) -> bool:
        mem = self._mem
        return not (
            mem.is_terminated()
            or mem.actions.pending
            or self._background.busy()
            # See the module docstring: the waiter needs this run to end its turn.
            or mem.turns.waiting
        )

    async def continue_if_due(self, turn: TurnCursor | None, *, idle: bool = False) -> None:
        """Continue as new when this run's history is long, when a pinned run's worker
        deployment has a new target version, or (`idle`) when the idle timer fired; called
        at safe points only."""
        mem = self._mem
        start = mem.start
        self._upgrade_blocked = False
        if not self._may_continue():
            return
        # A run stays on its build (the workflow is pinned) and moves at an idle
        # continue-as-new, so a turn runs on one build's code and definitions from start
        # to end. Asked only when Temporal says so: no history before this patch can.
        upgrading = (
            turn is None and mem.history.last.target_changed and workflow.patched(UPGRADE_PATCH)
        )
        if not upgrading and not idle and not self._history_is_long():
            return
        self._upgrade_blocked = upgrading  # until it is made, below
        settling = mem.history.in_use or workflow.patched(SETTLE_PATCH)
        flushed = False
        while True:
            await workflow.wait_condition(
                lambda: workflow.all_handlers_finished() or bool(mem.turns.waiting)
            )
            if mem.is_terminated():
                return
            if mem.turns.waiting:  # one arrived meanwhile: defer (see the module docstring)
                mem.incident("continue_as_new_deferred", "a turn-waiting submit_turn is pending")
                return
            carried = carry_over(mem, self._agents.snapshot(), turn)
            next_input = start.model_copy(update={"carry_over": carried, "messages": []})
            size = encoded_size(next_input)
            if size > start.options.payload_budget_bytes:
                # Heavy queued messages: the next step drains them into the store first.
                mem.incident("continue_as_new_postponed", f"carry-over is {size} bytes")
                return
            info = workflow.info()
            if mem.truthful_log:
                # Temporal can still refuse this continue-as-new (an update arriving before
                # the completion): only the next run, once it exists, records the transition.
                carried.continued_from = ContinuedFrom(
                    run=mem.counters.runs,
                    run_id=info.run_id,
                    history_events=info.get_current_history_length(),
                    history_bytes=info.get_current_history_size(),
                    carry_over_bytes=size,
                    upgraded=upgrading,
                    build_id=current_build_id(),
                    idle=idle and not upgrading,
                )
            if flushed and (settling or (not mem.outbox and not mem.outbox_messages)):
                break  # what signals added since the last write is carried (`carry_over`)
            if not mem.truthful_log and not flushed:  # older runs announced it themselves
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
            flushed = True
            # Every event and message so far reaches the store before this run ends (what
            # signals add during the settle is carried).
            await self._outbox.flush(with_thread_row=True)
            if settling:
                await self._outbox.settle()
        if upgrading:
            # AUTO_UPGRADE for the new run's first task only: it starts on the target
            # version, then is pinned there by the workflow's own behaviour.
            workflow.continue_as_new(
                next_input,
                initial_versioning_behavior=ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
            )
        workflow.continue_as_new(next_input)

    def _history_is_long(self) -> bool:
        """Whether this run should continue as new now, by a reading every replay shares.

        Runs recorded before the gauge (`workflows/history_gauge.py`) decide as they did:
        from the live reading, then by asking for the continue-as-new patches here.
        """
        mem = self._mem
        options = mem.start.options
        if mem.history.in_use:
            return mem.history.last.is_long(options)
        if not live_reading().is_long(options):
            return False
        return workflow.patched(PATCH_ID)  # False: a history from before continue-as-new


async def store_carried(mem: ThreadMemory, outbox: Outbox) -> None:
    """In a continued run, first record the transition (when the previous run left it to
    this one) and store what the previous run's outbox carried."""
    came = mem.start.carry_over.continued_from if mem.start.carry_over else None
    if came is not None:
        continued: dict[str, Any] = {
            "run": mem.counters.runs,
            "previousRun": came.run,
            "previousRunId": came.run_id,
            "historyEvents": came.history_events,
            "historyBytes": came.history_bytes,
            "carryOverBytes": came.carry_over_bytes,
        }
        if came.upgraded:
            continued |= {
                "reason": REASON_VERSION_CHANGED,
                "previousBuildId": came.build_id,
                "buildId": current_build_id(),
            }
        elif came.idle:
            continued["reason"] = REASON_IDLE
        mem.emit("thread.updated", {"continuedAsNew": continued})
        # Emitted only with the transition above, so it never makes a flush of its own
        # (no new command): runs before the truthful log announce nothing here.
        mem.emit("history.window.loaded", window_loaded(mem, came.run_id))
    if mem.outbox or mem.outbox_messages:
        await outbox.flush()


def current_build_id() -> str | None:
    """The build id of the worker deployment version this run runs on (None: unversioned)."""
    version = workflow.info().get_current_deployment_version()
    return version.build_id if version is not None else None


def window_loaded(mem: ThreadMemory, previous_run_id: str) -> dict[str, Any]:
    """`history.window.loaded` of a continued run: the window it works from, as carried
    (the boundary in force, the estimate it starts with, the messages it indexes); the
    transcript itself stays in the store, where the next `model.call` reads it."""
    state, index = mem.window, mem.index
    boundary = state.boundary
    return {
        "reason": "continued_as_new",
        "run": mem.counters.runs,
        "previousRunId": previous_run_id,
        "boundaryId": boundary.boundary_id if boundary else None,
        "firstKeptPosition": boundary.first_kept_position if boundary else 0,
        "messages": mem.index_base + len(index),
        "indexedFromPosition": index[0].position if index else None,
        "projectedTokens": state.projected_tokens(),
        "promptBudget": state.prompt_budget,
        "tokenScale": state.token_scale,
        "learntLimit": state.learnt_limit,
    }


def carry_over(
    mem: ThreadMemory, snapshot: DefinitionSnapshot, turn: TurnCursor | None
) -> ThreadCarryOver:
    """The thread's memory, as the next run's start input carries it: each part's state as
    it is (a copy: this run goes on until Temporal takes the continue-as-new)."""
    index = mem.index[-CARRIED_INDEX:]
    return ThreadCarryOver(
        snapshot=snapshot,
        status=mem.status,
        turn=turn,
        active_agent=mem.active_agent,
        stop_reason=mem.stop.reason,
        last_outcome=mem.last_outcome,
        terminated_at=mem.terminated_at,
        terminate_reason=mem.terminate_reason,
        queue=[entry.model_copy() for entry in mem.queue],
        index=index,
        index_base=mem.index_base + len(mem.index) - len(index),
        counters=mem.counters.model_copy(update={"runs": mem.counters.runs + 1}),
        usage=mem.usage.model_copy(),
        cost_unknown=mem.cost_unknown,
        warnings=mem.warnings,
        incidents=list(mem.incidents),
        budget=mem.budget,
        outbox=list(mem.outbox),
        outbox_messages=list(mem.outbox_messages),
        context=mem.window.model_copy(deep=True),
        turns=mem.turns.carry(),
        actions=mem.actions.model_copy(deep=True),
        subagents=mem.subagents.model_copy(deep=True),
        effect_book=mem.effects.model_copy(deep=True),
        mcp=mem.mcp.model_copy(deep=True),
        definitions_upgrade=mem.definitions_upgrade,
    )


def restore(
    thread_id: str,
    start: ThreadStartInput,
    carried: ThreadCarryOver,
    context: Context | None = None,
) -> ThreadMemory:
    """The memory a continued run starts with (built before any handler runs)."""
    turn = carried.turn
    return ThreadMemory(
        thread_id=thread_id,
        start=start,
        context=context or WorkflowContext(),
        snapshot=carried.snapshot,
        status=carried.status,
        active_turn=turn.turn_id if turn else None,
        active_side=turn.side if turn else None,
        active_agent=carried.active_agent,
        stop=ThreadStop(carried.stop_reason),
        last_outcome=carried.last_outcome,
        terminated_at=carried.terminated_at,
        terminate_reason=carried.terminate_reason,
        queue=deque(entry.model_copy() for entry in carried.queue),
        index=list(carried.index),
        index_base=carried.index_base,
        counters=carried.counters.model_copy(),
        usage=carried.usage.model_copy(),
        cost_unknown=carried.cost_unknown,
        warnings=carried.warnings,
        incidents=list(carried.incidents),
        budget=carried.budget,
        outbox=list(carried.outbox),
        outbox_messages=list(carried.outbox_messages),
        window=carried.context.model_copy(deep=True) if carried.context else ContextState(),
        turns=TurnBook.restore(carried.turns),
        actions=carried.actions.model_copy(deep=True),
        subagents=carried.subagents.model_copy(deep=True),
        effects=carried.effect_book.model_copy(deep=True),
        mcp=carried.mcp.model_copy(deep=True),
        definitions_upgrade=carried.definitions_upgrade,
    )
