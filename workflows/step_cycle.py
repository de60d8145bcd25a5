"""One step of a turn (Runtime §3 steps 1-7): drain, call the model, run the tools, stop rules.

The step's parts are the thread's collaborators; this class only puts them in the spec's
order. The session and turn loops around it live in `agent_thread.py`.
"""

from __future__ import annotations

from typing import Protocol

from weft.contract.messages import Side
from weft.contract.thread import Counters, StopReason
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.control_plane import ControlPlane
from weft.workflows.intake import Intake
from weft.workflows.model_step import ModelCaller, ModelInterrupted
from weft.workflows.stop_rules import StepFacts, Stop, evaluate_step, session_status
from weft.workflows.subagents.agent_tools import AgentTools
from weft.workflows.tool_runner import ToolRunner
from weft.workflows.views import Identity


class StepView(Identity, Protocol):
    """What one step reads of the thread."""

    @property
    def counters(self) -> Counters: ...

    @property
    def stop_reason(self) -> StopReason | None: ...

    def is_terminated(self) -> bool: ...


class StepCycle:
    """Runs one step of a side's turn and says whether the turn goes on."""

    def __init__(
        self,
        mem: StepView,
        agents: ActiveAgent,
        intake: Intake,
        agent_tools: AgentTools,
        model: ModelCaller,
        tools: ToolRunner,
        control: ControlPlane,
    ) -> None:
        self._mem = mem
        self._agents = agents
        self._intake = intake
        self._agent_tools = agent_tools
        self._model = model
        self._tools = tools
        self._control = control

    async def run(self, side: Side, turn_id: str, step_id: str, side_steps: int) -> Stop | None:
        """Runtime §3 steps 1-7 for one model call (the turn's step `step_id`, counted and
        named by the turn loop); a Stop, or None to continue."""
        mem = self._mem
        drained = await self._intake.drain(side, turn_id, step_id)  # 1
        new_messages = await self._agent_tools.start_immediate(side, turn_id, drained.messages)
        # The agent this step calls, resolved once the queued tools ran (one may hand off).
        agent = self._agents.in_force(side)
        if mem.is_terminated():
            return Stop("session", "aborted_by_user")
        while True:
            if drained.oversized:
                return self._intake.refuse(drained, turn_id=turn_id, step_id=step_id)
            try:
                reply = await self._model.call(  # 2-4
                    side, turn_id, step_id, new_messages, agent=agent
                )
                break
            except ModelInterrupted:
                # The drained messages went back to the outbox: restart the step with
                # whatever is queued now.
                drained = await self._intake.drain(side, turn_id, step_id)
                new_messages = drained.messages
                agent = self._agents.in_force(side)
        if reply is None:
            return Stop("session", mem.stop_reason or "step_error")
        outcomes = await self._tools.run_calls(  # 5-6
            reply.message.tool_calls or [], side=side, turn_id=turn_id, step_id=step_id
        )
        if mem.is_terminated():
            return Stop("session", "aborted_by_user")
        side_cfg = self._agents.side(side)
        status = session_status(side_cfg, outcomes)
        if status is not None:
            self._control.relay_status("set_status", status, turn_id=turn_id, step_id=step_id)
        return evaluate_step(
            StepFacts(  # 7
                side=side_cfg,
                reply=reply.message,
                outcomes=outcomes,
                side_steps_in_turn=side_steps,
                session_steps=mem.counters.session_steps,
                max_total_steps=mem.start.options.max_total_steps,
            )
        )
