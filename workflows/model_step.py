"""Runtime §3 steps 2-4: call the side's model, then its fallbacks in order.

`model.call` writes the new messages and the outbox, reads the transcript from the store,
streams from the provider and writes the assistant message; its result is the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from temporalio.exceptions import ActivityError, CancelledError

from weft.contract.activities import ACTIVITY_MODEL_CALL, ModelCallInput, ModelCallResult
from weft.contract.context import CompactionReason
from weft.contract.context_state import ContextState
from weft.contract.definitions import ModelDef, PromptDef
from weft.contract.definitions_version import DefinitionsRefreshInput
from weft.contract.mcp import CatalogReason
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Message, Side
from weft.contract.prompt_tools import PromptScope
from weft.contract.thread import Counters
from weft.workflows import budget, ui_summaries
from weft.workflows.active_agent import ActiveAgent, InForce
from weft.workflows.activity_calls import Carried, Limits, start_within_budget
from weft.workflows.budget import BudgetRoot, BudgetSeen
from weft.workflows.context_keeper import ContextKeeper, Spend, add_usage, overflow_details
from weft.workflows.definitions_refresh import DefinitionsRefresh
from weft.workflows.failures import failure_text, hook_blocks
from weft.workflows.in_flight import InFlight
from weft.workflows.mcp_tools import McpTools
from weft.workflows.outbox import Outbox
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.views import Facts, Identity, Pending, Starts, Transcript


class ModelInterrupted(Exception):
    """submit_turn(policy=interrupt) cancelled the call; the drained messages went back to
    the outbox, and the step restarts with whatever is queued now."""


class _DefinitionsChanged(Exception):
    """The session's first call found newer definitions and was not made: the thread now
    runs them, and the call is made again with them (`messages` still to carry)."""

    def __init__(self, messages: list[Message]) -> None:
        super().__init__("definitions changed")
        self.messages = messages


class PromptModelFailed(Exception):
    """Every model of a prompt tool's step failed: the prompt tool fails, not the turn."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass(frozen=True)
class _Plan:
    """One model call's agent in force, prompt and model, and the compaction (its reason)
    and MCP listings that must run before it: worked out once, and again only after an
    await that may have changed them (a move to newer definitions)."""

    agent: InForce
    prompt: PromptDef
    model: ModelDef
    compaction: CompactionReason | None
    listings: dict[str, CatalogReason]


class ModelView(
    Facts, Identity, Pending, Starts, Transcript, Spend, BudgetSeen, BudgetRoot, Protocol
):
    """What calling the model reads of the thread (`last_outcome` it assigns)."""

    last_outcome: str | None

    @property
    def active_agent(self) -> str | None: ...

    @property
    def counters(self) -> Counters: ...

    @property
    def window(self) -> ContextState: ...

    @property
    def mcp(self) -> McpBook: ...

    @property
    def stop(self) -> ThreadStop: ...

    def forget_message(self, message_id: str) -> None: ...


class ModelCaller:
    """Calls the model of one step, with fallbacks; failures end the turn, not the thread."""

    def __init__(
        self,
        mem: ModelView,
        agents: ActiveAgent,
        in_flight: InFlight,
        context: ContextKeeper,
        mcp: McpTools,
        outbox: Outbox,
        definitions: DefinitionsRefresh,
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._definitions = definitions
        self._agents = agents
        self._in_flight = in_flight
        self._context = context
        self._mcp = mcp
        self._limits = Limits.of_models(mem.start.options)
        # Fixed for the run: the start input names it, else the thread is its own root.
        self._budget_root = budget.budget_root(mem)

    async def call(
        self,
        side: Side,
        turn_id: str,
        step_id: str,
        new_messages: list[Message],
        scope: PromptScope | None = None,
        *,
        agent: InForce | None = None,
    ) -> ModelCallResult | None:
        """The assistant's reply; None when every model failed (the stop reason says why).

        `agent` is the agent in force as the step resolved it (resolved here when not
        given); the call hands it to the parts it crosses, and resolves it again only when
        the definitions moved. Raises `ModelInterrupted` when a newer message interrupted
        the call. Inside a prompt tool (`scope`) it calls that prompt's model, raises
        `PromptModelFailed` when every model failed, and leaves the thread's context alone:
        a prompt tool's messages are not the caller's transcript, so they are neither fitted
        nor counted, and a newer message waits for the main loop instead of interrupting.
        """
        mem = self._mem
        plan = self._plan(side, scope, agent)
        check = None
        if scope is None:
            check, asked = await self._definitions.first_call_check(
                turn_id, other_first=plan.compaction is not None or bool(plan.listings)
            )
            if asked:  # the local activity ran: the definitions may have moved meanwhile
                plan = self._plan(side, scope)
        message_id, position = mem.new_id("msg"), mem.reserve_position()
        messages = [*mem.take_outbox_messages(), *new_messages]
        while True:
            try:
                return await self._call(
                    side, turn_id, step_id, messages, scope, (message_id, position), check, plan
                )
            except _DefinitionsChanged as changed:
                # The same message id and position: the call that was not made took none.
                messages, check = changed.messages, None
                plan = self._plan(side, scope)  # with the definitions it moved to

    def _plan(self, side: Side, scope: PromptScope | None, agent: InForce | None = None) -> _Plan:
        """The agent in force, the prompt and model to call, and what must run first."""
        agent = agent or self._agents.in_force(side)
        snapshot = agent.snapshot
        prompt = snapshot.prompts[scope.prompt] if scope else agent.prompt
        model = snapshot.models[prompt.model] if scope else agent.model
        # A prompt that uses no MCP server has nothing to list.
        listings = self._listings(agent, prompt) if scope or agent.mcp_servers else {}
        return _Plan(
            agent=agent,
            prompt=prompt,
            model=model,
            compaction=None if scope else self._mem.window.compaction_due(model),
            listings=listings,
        )

    def _listings(self, agent: InForce, prompt: PromptDef) -> dict[str, CatalogReason]:
        """The MCP servers `prompt` uses that must be listed before it calls its model."""
        return self._mem.mcp.to_list(prompt, agent.snapshot.mcp_servers)

    async def _call(
        self,
        side: Side,
        turn_id: str,
        step_id: str,
        messages: list[Message],
        scope: PromptScope | None,
        reserved: tuple[str, int],
        check: DefinitionsRefreshInput | None,
        plan: _Plan,
    ) -> ModelCallResult | None:
        mem, snapshot, prompt = self._mem, plan.agent.snapshot, plan.prompt
        candidates = [prompt.model, *plan.model.fallbacks]
        message_id, position = reserved
        listings = plan.listings
        if plan.compaction is not None:
            messages = await self._context.fit(
                plan.compaction, prompt.model, side, turn_id, step_id, messages
            )
            if plan.agent.mcp_servers:  # a `refresh_tools` may have come meanwhile
                listings = self._listings(plan.agent, prompt)
        if listings:
            # The prompt's MCP tools are listed the first time it calls its model (and
            # again when a refresh is due), so the request below can offer them.
            await self._mcp.ensure(prompt, listings, side=side, turn_id=turn_id, step_id=step_id)
        last_error = "no model was tried"
        overflow_retried = False
        index = 0
        while index < len(candidates):
            stopped = self._in_flight.turn_stop
            if mem.is_terminated():  # terminate arrived during a compaction
                mem.stop.aborted_by_user()
                break
            if stopped is not None:  # interrupt_turn: call nothing more
                mem.stop.interrupted()
                break
            model_name = candidates[index]
            carried = Carried(mem.take_outbox(), messages)
            call = ModelCallInput(
                thread_id=mem.thread_id,
                session_id=mem.session_id,
                snapshot_id=snapshot.snapshot_id,
                side=side,
                model=model_name,
                agent=mem.active_agent,
                turn_id=turn_id,
                step_id=step_id,
                step=mem.counters.steps,
                assistant_message_id=message_id,
                assistant_position=position,
                new_messages=carried.messages,
                outbox=carried.events,
                window=mem.window.window(mem.start.options.context),
                scope=scope,
                budget_root=self._budget_root,
                mcp_catalogs=mem.mcp.ids(),
                env_writes=mem.counters.env_writes,
                definitions_check=check,
            )
            handle, carried = await start_within_budget(
                mem,
                self._outbox,
                ACTIVITY_MODEL_CALL,
                call,
                carried,
                without_carried={"new_messages": [], "outbox": []},
                result_type=ModelCallResult,
                limits=self._limits,
                summary=ui_summaries.model_call(
                    model_name, call.step, side, prompt=scope.prompt if scope else None
                ),
            )
            # Persisted messages are not carried again by a fallback.
            messages = carried.messages
            pending, check = check, None  # asked once: a fallback is past the check
            self._in_flight.track(handle, model=scope is None, turn_work=True)
            try:
                result = await handle
            except ActivityError as err:
                mem.return_outbox(carried.events)
                if pending is not None and self._definitions.answered(err):
                    raise _DefinitionsChanged(messages) from None
                stopped = self._in_flight.turn_stop
                if stopped is not None and not mem.is_terminated():
                    # interrupt_turn: the turn ends; what the step drained is kept below.
                    self._in_flight.clear_interrupt()
                    mem.stop.interrupted()
                    mem.emit(
                        "model.failed",
                        {
                            "code": "interrupted",
                            "model": model_name,
                            "messageId": message_id,
                            "reason": stopped.reason,
                        },
                        turn_id=turn_id,
                        step_id=step_id,
                    )
                    break
                if self._in_flight.take_interrupt() and not mem.is_terminated():
                    mem.return_messages(messages)
                    mem.emit(
                        "model.failed",
                        {"code": "interrupted", "model": model_name, "messageId": message_id},
                        turn_id=turn_id,
                        step_id=step_id,
                    )
                    raise ModelInterrupted() from None
                if mem.is_terminated() or isinstance(err.cause, CancelledError):
                    mem.stop.aborted_by_user()
                    break
                spent = budget.refusal(mem, err)
                if spent is not None:  # no fallback either: the whole tree is out of budget
                    mem.stop.budget_exhausted()
                    mem.last_outcome = spent
                    break
                blocks = hook_blocks(err)
                if blocks:
                    # The activity stored all but the refused messages, and its events.
                    refused = {b.message_id for b in blocks if b.message_id}
                    for message_id in refused:
                        mem.forget_message(message_id)
                    messages = [m for m in messages if m.id not in refused]
                    first = blocks[0]
                    mem.stop.hook_blocked()
                    mem.last_outcome = f"hook {first.hook_id!r} refused: {first.reason}"
                    break
                overflow = overflow_details(err) is not None and scope is None
                if overflow and not overflow_retried:
                    # The safety net: compact harder, then try the same model once more.
                    overflow_retried = True
                    messages = await self._context.recover(
                        err, model_name, side, turn_id, step_id, messages
                    )
                    continue
                last_error = failure_text(err)
                if overflow:
                    last_error = (
                        f"the conversation does not fit the context window of model "
                        f"{model_name!r}, even after compacting it: {last_error}"
                    )
                entry = mem.incident("model_failed", last_error, turn_id=turn_id, step_id=step_id)
                mem.emit(
                    "runtime.warning",
                    {
                        "code": "model_failed",
                        "model": model_name,
                        "message": last_error,
                        "incident": entry,
                        **(scope.event_fields() if scope else {}),
                    },
                    turn_id=turn_id,
                    step_id=step_id,
                )
                index += 1
                continue
            finally:
                self._in_flight.track(None)
            self._in_flight.clear_interrupt()
            if scope is None:
                mem.window.observe(result.context)
            mem.index_message(result.message)
            add_usage(mem, result.usage, result.cost_usd)
            budget.observe(mem, result.budget)
            return result
        # Nothing answered: keep the drained messages (idempotent writes) and fail the turn.
        mem.outbox_messages.extend(messages)
        if index >= len(candidates):  # every candidate was tried (an event, not a command)
            mem.emit(
                "routing.not_possible",
                {
                    "candidates": candidates,
                    "candidateCount": len(candidates),
                    "reason": last_error,
                    **(scope.event_fields() if scope else {}),
                },
                turn_id=turn_id,
                step_id=step_id,
            )
        if scope is not None and index >= len(candidates):
            raise PromptModelFailed(last_error)
        if not mem.stop.stopped_in_step():
            mem.stop.step_failed()
            mem.last_outcome = last_error
            mem.incident("step_error", last_error, turn_id=turn_id, step_id=step_id)
        return None
