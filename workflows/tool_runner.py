"""Runtime §3 steps 5-6: run a step's tool calls sequentially and persist their results.

Each call is one `tool.call` activity that also writes the result message, under an id
drawn once per call, so a retried attempt stores nothing twice. A function tool defined
`quick` runs it as a local activity, in the workflow task that decided it
(docs/defining-agents.md, "Quick tools")."""

from __future__ import annotations

import json
from typing import Protocol

from temporalio.exceptions import ActivityError, CancelledError

from weft.contract.actions import ASK_HUMAN_TOOL
from weft.contract.activities import (
    ACTIVITY_TOOL_CALL,
    Intent,
    ToolCallInput,
    ToolCallResult,
    ToolResult,
)
from weft.contract.definitions import ToolSpec
from weft.contract.mcp import McpToolTarget
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Message, QueuedTool, Side, ToolCall, ToolCallFunction
from weft.contract.prompt_tools import PromptScope
from weft.contract.thread import Counters
from weft.contract.ui_text import secret_values
from weft.workflows import ui_summaries
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.activity_calls import Carried, Limits, start_within_budget
from weft.workflows.human_gate import HumanGate
from weft.workflows.in_flight import InFlight
from weft.workflows.outbox import Outbox
from weft.workflows.payload_size import encoded_size, megabytes
from weft.workflows.prompt_tools import PromptToolRunner, error_text, with_scope
from weft.workflows.stop_rules import ToolOutcome
from weft.workflows.tool_records import ToolRecords
from weft.workflows.views import Facts, Identity, Pending, Starts, Transcript

OUTCOME_UNKNOWN = (
    "outcome unknown: the tool call was interrupted and its retries were exhausted, so it "
    "may or may not have taken effect"
)


# Tools the workflow runs itself: they start, signal or await other threads.
AGENT_TOOL_KINDS = ("subagent", "handoff", "subagent_create", "subagent_message")


class ToolHost(Protocol):
    """What the tool runner needs from the workflow that owns it."""

    async def run_agent_tool(
        self, call: ToolCall, spec: ToolSpec, *, side: Side, turn_id: str, step_id: str
    ) -> ToolResult: ...

    def apply_intents(self, intents: list[Intent]) -> None: ...


class ToolsView(Facts, Identity, Pending, Starts, Transcript, Protocol):
    """What running tools reads of the thread (`last_outcome` it assigns)."""

    last_outcome: str | None

    @property
    def active_agent(self) -> str | None: ...

    @property
    def counters(self) -> Counters: ...

    @property
    def mcp(self) -> McpBook: ...

    @property
    def truthful_log(self) -> bool: ...


class ToolRunner:
    """Runs tool calls for one thread, in order, one activity each."""

    def __init__(
        self,
        mem: ToolsView,
        agents: ActiveAgent,
        gate: HumanGate,
        in_flight: InFlight,
        host: ToolHost,
        prompts: PromptToolRunner,
        outbox: Outbox,
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._agents = agents
        self._gate = gate
        self._in_flight = in_flight
        self._host = host
        self._prompts = prompts
        self._limits = Limits.of_tools(mem.start.options)
        self._records = ToolRecords(mem)

    async def run_calls(
        self,
        calls: list[ToolCall],
        *,
        side: Side,
        turn_id: str,
        step_id: str,
        scope: PromptScope | None = None,
    ) -> list[ToolOutcome]:
        """Run the model's tool calls sequentially, in the order it returned them (inside
        the prompt tool `scope`, when one runs them)."""
        # Calls after a handoff in the same step still run for the agent that asked.
        agent = self._mem.active_agent
        outcomes: list[ToolOutcome] = []
        for call in calls:
            stopped = self._stopped()
            if stopped is not None:
                self._records.failure(
                    call,
                    self._mem.new_id("msg"),
                    self._mem.reserve_position(),
                    side,
                    turn_id,
                    step_id,
                    f"not run: {stopped}",
                    code="aborted",
                    scope=scope,
                )
                continue
            outcomes.append(await self._run_one(call, [], side, turn_id, step_id, agent, scope))
        return outcomes

    async def run_queued(
        self, tool: QueuedTool, *, prior: list[Message], side: Side, turn_id: str, step_id: str
    ) -> ToolOutcome:
        """Run a `queue_tool` entry as if the model had called it (normal tool flow)."""
        call = ToolCall(
            id=self._mem.new_id("call"),
            function=ToolCallFunction(name=tool.name, arguments=json.dumps(tool.args)),
        )
        # The model must see a call before its result, so the call is stored as an
        # assistant message of its own, marked as queued.
        caller = self._mem.new_message(
            role="assistant",
            content=None,
            side=side,
            turn_id=turn_id,
            tool_calls=[call],
            metadata={"queued_tool": True},
        )
        agent = self._mem.active_agent
        return await self._run_one(call, [*prior, caller], side, turn_id, step_id, agent)

    async def _run_one(
        self,
        call: ToolCall,
        prior: list[Message],
        side: Side,
        turn_id: str,
        step_id: str,
        agent: str | None,
        scope: PromptScope | None = None,
    ) -> ToolOutcome:
        gate, prompt = self._gate, scope.prompt if scope else None
        spec = self._agents.snapshot().tools.get(call.function.name)
        mcp = None if spec else self._mcp_tool(call.function.name, side, agent, scope)
        local = self._prompts.refuse_unlisted(call, scope)
        blocked = False
        if local is None and call.function.name == ASK_HUMAN_TOOL and spec and spec.builtin:
            local = await gate.ask_human(
                call, side=side, turn_id=turn_id, step_id=step_id, prompt=prompt
            )
        elif local is None:
            local = await gate.permit(
                call,
                side=side,
                turn_id=turn_id,
                step_id=step_id,
                prompt=prompt,
                mcp=mcp is not None,
            )
        if local is None and spec is not None and spec.kind in (*AGENT_TOOL_KINDS, "prompt"):
            self._mem.outbox_messages.extend(prior)
            prior = []
            self._mem.emit(
                "tool.started",
                with_scope(
                    {"name": call.function.name, "arguments": call.function.arguments}, scope
                ),
                turn_id=turn_id,
                step_id=step_id,
                tool_call_id=call.id,
            )
            if spec.kind == "prompt":
                ran = await self._prompts.run(
                    call, spec, scope, side=side, turn_id=turn_id, tools=self
                )
                local, blocked = ran.result, ran.blocked
            else:
                local = await self._host.run_agent_tool(
                    call, spec, side=side, turn_id=turn_id, step_id=step_id
                )
        if local is not None:
            # Answered by the workflow itself (a human's answer, a permission denial, an
            # agent tool or a prompt tool).
            self._mem.outbox_messages.extend(prior)
            self._records.result(call, side, turn_id, step_id, local, scope)
            succeeded = local.status == "success"
            return ToolOutcome(call, succeeded, blocked, None if succeeded else local.error)
        quick = spec is not None and spec.quick and mcp is None
        return await self._run_activity(
            call, prior, side, turn_id, step_id, agent, scope, mcp, quick=quick
        )

    def _stopped(self) -> str | None:
        """Why the step's calls must stop (terminate, or interrupt_turn), if they must."""
        if self._mem.is_terminated():
            return "the thread was terminated"
        return None if self._in_flight.turn_stop is None else "the turn was interrupted"

    def _mcp_tool(
        self, name: str, side: Side, agent: str | None, scope: PromptScope | None
    ) -> McpToolTarget | None:
        """Where the MCP tool `name` runs, when the calling prompt offers one by that name."""
        snapshot = self._agents.snapshot()
        prompt = snapshot.prompts[
            scope.prompt if scope else snapshot.agent_def(agent).side(side).prompt
        ]
        spec = self._mem.mcp.tool(prompt, name)
        if spec is None:
            return None
        digest = self._mem.mcp.catalogs[spec.server].digest
        return McpToolTarget(server=spec.server, tool=spec.tool, digest=digest)

    async def _run_activity(
        self,
        call: ToolCall,
        prior: list[Message],
        side: Side,
        turn_id: str,
        step_id: str,
        agent: str | None,
        scope: PromptScope | None,
        mcp: McpToolTarget | None = None,
        *,
        quick: bool = False,
    ) -> ToolOutcome:
        """Run the call as `tool.call`: a local activity for a tool defined `quick`."""
        mem, budget = self._mem, self._mem.start.options.payload_budget_bytes
        message_id, position = mem.new_id("msg"), mem.reserve_position()
        size = encoded_size(call)
        if size > budget:
            mem.outbox_messages.extend(prior)
            text = (
                f"tool {call.function.name!r} was not run: its call is {megabytes(size)} "
                f"encoded, over the thread's payload budget of {megabytes(budget)} (Temporal "
                "refuses payloads over 2 MB); pass large data by reference"
            )
            self._records.failure(
                call,
                message_id,
                position,
                side,
                turn_id,
                step_id,
                text,
                code="payload_too_large",
                scope=scope,
            )
            return ToolOutcome(call, succeeded=False, error=text)
        carried = Carried(mem.take_outbox(), [*mem.take_outbox_messages(), *prior])
        tool_input = ToolCallInput(
            thread_id=mem.thread_id,
            session_id=mem.session_id,
            snapshot_id=self._agents.snapshot().snapshot_id,
            side=side,
            agent=agent,
            turn_id=turn_id,
            step_id=step_id,
            tool_call=call,
            result_message_id=message_id,
            result_position=position,
            outbox=carried.events,
            prior_messages=carried.messages,
            scope=scope,
            mcp=mcp,
            env_writes=mem.counters.env_writes,
        )
        handle, carried = await start_within_budget(
            mem,
            self._outbox,
            ACTIVITY_TOOL_CALL,
            tool_input,
            carried,
            without_carried={"outbox": [], "prior_messages": []},
            result_type=ToolCallResult,
            limits=self._limits,
            summary=ui_summaries.tool_call(
                call.function.name,
                call.function.arguments,
                secret_values(self._agents.env(side)),
            ),
            # Terminate records the call aborted only once it has stopped (a tool with
            # effects may still be running otherwise); a late result then writes nothing.
            wait_for_cancel=mem.truthful_log,
            local=quick,
        )
        self._in_flight.track(handle, turn_work=True)
        try:
            result = await handle
        except ActivityError as err:
            carried.give_back(mem)
            stopped = self._stopped()
            cancelled = isinstance(err.cause, CancelledError) or stopped is not None
            why = stopped or "the thread was terminated"
            text = f"not finished: {why}" if cancelled else OUTCOME_UNKNOWN
            self._records.failure(
                call,
                message_id,
                position,
                side,
                turn_id,
                step_id,
                text,
                code="aborted" if cancelled else "outcome_unknown",
                scope=scope,
            )
            return ToolOutcome(call, succeeded=False, error=text)
        finally:
            self._in_flight.track(None)
        mem.index_message(result.message)
        mem.mcp.observe(result.mcp)
        self._host.apply_intents(result.intents)
        if result.blocked is not None:
            mem.last_outcome = f"hook {result.blocked.hook_id!r} refused: {result.blocked.reason}"
        return ToolOutcome(
            call,
            succeeded=result.message.tool_status == "success",
            blocked=result.blocked is not None,
            error=error_text(result.message),
        )
