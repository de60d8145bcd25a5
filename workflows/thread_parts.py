"""The AgentThread's parts, built once over one memory in the order they depend on.

`build_parts` is the workflow's composition root: each part gets its view of the memory
and the parts it calls, named at the call that builds it, so what depends on what reads
top to bottom. The workflow calls back into itself only through `ThreadHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from weft.workflows.active_agent import ActiveAgent
from weft.workflows.background import BackgroundTasks
from weft.workflows.budget import BudgetControl
from weft.workflows.context_keeper import ContextKeeper
from weft.workflows.continuation import Continuation
from weft.workflows.control_plane import ControlHost, ControlPlane
from weft.workflows.definitions_refresh import DefinitionsRefresh
from weft.workflows.effects import EffectHost, EffectTimers
from weft.workflows.human_gate import GateHost, HumanGate
from weft.workflows.idle_watch import IdleWatch
from weft.workflows.in_flight import InFlight
from weft.workflows.intake import Intake
from weft.workflows.mcp_tools import McpTools
from weft.workflows.model_step import ModelCaller
from weft.workflows.outbox import Outbox
from weft.workflows.prompt_tools import PromptToolRunner
from weft.workflows.queue import ThreadQueue
from weft.workflows.session_loop import SessionHost, SessionLoop
from weft.workflows.step_cycle import StepCycle
from weft.workflows.subagents.agent_tools import AgentTools
from weft.workflows.subagents.parent_reporter import ParentReporter, ReporterHost
from weft.workflows.subagents.registry import SubagentRegistry
from weft.workflows.subagents.spawner import SubagentSpawner
from weft.workflows.thread_state import ThreadMemory
from weft.workflows.tool_runner import ToolHost, ToolRunner
from weft.workflows.transcript_edits import TranscriptEdits


class ThreadHost(GateHost, ToolHost, ControlHost, EffectHost, ReporterHost, SessionHost, Protocol):
    """Everything the parts ask of the workflow that owns them (each asks for its own)."""


@dataclass(frozen=True)
class ThreadParts:
    """The parts the workflow's handlers and lifecycle call; the others are held by these."""

    in_flight: InFlight
    background: BackgroundTasks
    outbox: Outbox
    queue: ThreadQueue
    registry: SubagentRegistry
    agent_tools: AgentTools
    reporter: ParentReporter
    context: ContextKeeper
    control: ControlPlane
    mcp: McpTools
    continuation: Continuation
    idle: IdleWatch
    effects: EffectTimers
    session: SessionLoop
    budget: BudgetControl
    definitions: DefinitionsRefresh


def build_parts(
    mem: ThreadMemory, host: ThreadHost, *, refuse_if_not_started: Callable[[], None]
) -> ThreadParts:
    """Build the thread's parts over `mem`, and register with the control plane the
    signals, updates and intents each part owns.

    `refuse_if_not_started` runs first in the validators of the parts' checked updates.
    """
    # What the others share: the definitions in force, the activity in flight, the tasks
    # beside the steps, the writer of what the workflow produced, and the queue.
    agents = ActiveAgent(mem)
    in_flight = InFlight()
    background = BackgroundTasks()
    outbox = Outbox(mem)
    queue = ThreadQueue(mem)
    # Subagents: the registry of children, starting them, the agent tools, the parent.
    registry = SubagentRegistry(mem, queue, outbox)
    spawner = SubagentSpawner(mem, agents, registry, queue, background)
    agent_tools = AgentTools(mem, agents, registry, spawner)
    reporter = ParentReporter(mem, background, host)
    # Signals, updates and intents, and the context window they may ask to compact.
    context = ContextKeeper(mem, agents, in_flight, outbox)
    control = ControlPlane(mem, queue, in_flight, registry, spawner, reporter, context, host)
    # One step: the human gate, the model (with MCP catalogues), the tools, the drain.
    gate = HumanGate(mem, agents, host, outbox)
    mcp = McpTools(mem, agents, gate, background, outbox)
    definitions = DefinitionsRefresh(mem)
    model = ModelCaller(mem, agents, in_flight, context, mcp, outbox, definitions)
    prompts = PromptToolRunner(mem, agents, model)
    tools = ToolRunner(mem, agents, gate, in_flight, host, prompts, outbox)
    intake = Intake(mem, queue, tools)
    steps = StepCycle(mem, agents, intake, agent_tools, model, tools, control)
    # Around the steps: continue-as-new, effects, sessions and budgets.
    continuation = Continuation(mem, agents, background, outbox)
    idle = IdleWatch(mem)
    effects = EffectTimers(mem, in_flight, host, outbox)
    session = SessionLoop(
        mem, agents, queue, steps, effects, control, continuation, reporter, host, outbox
    )
    budget = BudgetControl(mem, background, outbox)

    mcp.register(control)
    control.handle_signals(continuation.signal_handlers())
    effects.register(control, refuse_if_not_started=refuse_if_not_started)
    budget.register(control, refuse_if_not_started=refuse_if_not_started)
    definitions.register(refuse_if_not_started=refuse_if_not_started)
    control.handle_intents(TranscriptEdits(mem).intent_handlers())
    return ThreadParts(
        in_flight=in_flight,
        background=background,
        outbox=outbox,
        queue=queue,
        registry=registry,
        agent_tools=agent_tools,
        reporter=reporter,
        context=context,
        control=control,
        mcp=mcp,
        continuation=continuation,
        idle=idle,
        effects=effects,
        session=session,
        budget=budget,
        definitions=definitions,
    )
