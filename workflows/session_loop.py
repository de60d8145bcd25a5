"""Runtime §3's session and turn loop: turns until the session stops, and each turn's
steps until a stop rule, a failure, an interrupt or terminate ends it."""

from __future__ import annotations

from typing import Protocol

from weft.contract.messages import Side
from weft.contract.thread import ThreadStatus, TurnCursor
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.continuation import Continuation
from weft.workflows.control_plane import ControlPlane
from weft.workflows.effects import EffectTimers
from weft.workflows.outbox import Outbox
from weft.workflows.queue import ThreadQueue
from weft.workflows.read_facts import (
    DefinitionFacts,
    FailureFacts,
    SessionFacts,
    definition_facts,
    failure_facts,
    session_facts,
)
from weft.workflows.step_cycle import StepCycle
from weft.workflows.stop_rules import Stop, session_turns_exhausted
from weft.workflows.subagents.parent_reporter import ParentReporter
from weft.workflows.turn_end import TurnEndView, finish_turn
from weft.workflows.turn_events import turn_failed, turn_started


class SessionHost(Protocol):
    """What the session loop needs from the workflow that owns it."""

    def set_status(self, status: ThreadStatus) -> None: ...

    def emit_snapshot(self) -> None: ...


class SessionView(TurnEndView, DefinitionFacts, FailureFacts, SessionFacts, Protocol):
    """What the session loop reads of the thread, and the turn in progress it sets."""

    active_turn: str | None
    active_side: Side | None

    def count_step(self, side: Side) -> None: ...

    def new_id(self, prefix: str) -> str: ...


class SessionLoop:
    """Runs a session's turns, side by side for `dual_ai`, and a turn's steps."""

    def __init__(
        self,
        mem: SessionView,
        agents: ActiveAgent,
        queue: ThreadQueue,
        steps: StepCycle,
        effects: EffectTimers,
        control: ControlPlane,
        continuation: Continuation,
        reporter: ParentReporter,
        host: SessionHost,
        outbox: Outbox,
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._agents = agents
        self._queue = queue
        self._steps = steps
        self._effects = effects
        self._control = control
        self._continuation = continuation
        self._reporter = reporter
        self._host = host

    async def run(self, resume: TurnCursor | None = None) -> None:
        """Run turns until the session stops; `resume` continues a turn of an earlier run."""
        mem = self._mem
        side: Side = "a"
        stop: Stop | None = None
        if resume is not None:
            side, turn_id, resumed_steps = resume.side, resume.turn_id, resume.side_steps
        else:
            head = self._queue.head()
            if (
                self._agents.agent().type == "dual_ai"
                and head.message
                and head.message.role == "assistant"
            ):
                side = "b"
            turn_id, resumed_steps = head.turn_id, None
            mem.counters.session_steps = mem.counters.side_a_turns = 0
            mem.counters.side_b_turns = 0
            mem.stop.session_started()
        self._host.set_status("running")
        while not mem.is_terminated():
            stop = await self._run_turn(side, turn_id, resumed_steps)
            resumed_steps = None
            agent = self._agents.agent()
            if stop is None or stop.scope == "session" or agent.type == "ai_human":
                break
            if session_turns_exhausted(agent, mem.counters.side_a_turns, mem.counters.side_b_turns):
                mem.stop.session_turns_spent()
                break
            side = "b" if side == "a" else "a"
            turn_id = mem.new_id("turn")
        mem.emit(
            "thread.updated",
            {"status": "idle", "stopReason": mem.stop_reason, **session_facts(mem)},
        )
        mem.active_turn = mem.active_side = None
        await self._reporter.report_session_end(stop)
        if not mem.is_terminated():
            self._host.set_status("waiting_input")
            self._host.emit_snapshot()
            await self._outbox.flush(with_thread_row=True)

    async def _run_turn(
        self, side: Side, turn_id: str, resumed_steps: int | None = None
    ) -> Stop | None:
        """Run steps of one side until a stop; None when the turn failed or was aborted.

        `resumed_steps` continues a turn the previous run began (and announced).
        """
        mem = self._mem
        mem.active_turn, mem.active_side = turn_id, side
        if resumed_steps is None:
            turn_started(mem, turn_id, {"side": side, **definition_facts(mem)})
        side_steps = resumed_steps or 0
        while not mem.is_terminated():
            side_steps += 1
            mem.count_step(side)
            stop = await self._steps.run(side, turn_id, mem.new_id("step"), side_steps)
            if stop is None and self._effects.has_due():
                # A safe point: between two steps, nothing in flight. Effects whose alarms
                # fired during the step run now; what they queue joins the next step.
                await self._effects.run_due()
            # An accepted interrupt_turn ends the turn before anything else (and before a
            # continue-as-new, which would forget it).
            interrupted = self._control.end_interrupted_turn(side, turn_id)
            if interrupted is not None:
                return interrupted
            if stop is None:
                await self._continuation.continue_if_due(
                    TurnCursor(side=side, turn_id=turn_id, side_steps=side_steps)
                )
                continue
            if stop.reason == "step_error" or mem.is_terminated():
                turn_failed(mem, turn_id, mem.stop_reason, failure_facts(mem))
                return None
            finish_turn(self._mem, side, turn_id, stop)
            return stop
        turn_failed(mem, turn_id, "aborted_by_user")
        return None
