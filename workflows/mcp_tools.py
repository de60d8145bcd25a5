"""MCP tools in the thread: listing catalogues, refreshing them, and elicitation.

A prompt's MCP servers are listed by the `tool.catalog` activity the first time a prompt
that uses them calls its model; the catalogues stay in `ThreadMemory.mcp` (carried), so a
replay reads them from history and never lists again. They are listed again only when
`refresh_tools` asks, or when a call finds that the server reported `list_changed`.

An MCP server may ask a person for input mid-call (`elicitation/create`): the `tool.call`
activity signals `mcp_elicitation`, this part publishes an `elicitation` action that any
client answers with `respond_action`, and the activity polls `mcp_elicitation_answer`
until the person, a timeout or terminate has decided.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from weft.contract.actions import ActionResolution, PendingAction
from weft.contract.carry_parts import ActionBook
from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.contract.mcp import (
    ACTIVITY_TOOL_CATALOG,
    SIGNAL_MCP_ELICITATION,
    SIGNAL_REFRESH_TOOLS,
    CatalogReason,
    ElicitationAnswer,
    McpElicitation,
    McpServerCatalog,
    RefreshTools,
    ToolCatalogInput,
    ToolCatalogResult,
)
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Side
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.background import BackgroundTasks
from weft.workflows.control import parse_single
from weft.workflows.control_plane import ControlPlane, refused_after_terminate
from weft.workflows.failures import failure_text
from weft.workflows.human_gate import HumanGate, expiry
from weft.workflows.outbox import Outbox
from weft.workflows.views import Identity, Terminated

# Histories from before MCP never list a catalogue (their snapshots define no server).
PATCH_ID = "mcp-tools-v1"
# Beyond the servers' own start-up timeouts, for the store writes and a slow worker.
CATALOG_SLACK_SECONDS = 30.0


class McpView(Terminated, Identity, Protocol):
    """What the MCP tools read of the thread, and the catalogues they change."""

    @property
    def mcp(self) -> McpBook: ...

    @property
    def actions(self) -> ActionBook: ...

    @property
    def snapshot(self) -> DefinitionSnapshot | None: ...

    @property
    def active_agent(self) -> str | None: ...

    @property
    def active_turn(self) -> str | None: ...

    @property
    def truthful_log(self) -> bool: ...


class McpTools:
    """Keeps the thread's MCP catalogues current and answers its servers' elicitations."""

    def __init__(
        self,
        mem: McpView,
        agents: ActiveAgent,
        gate: HumanGate,
        background: BackgroundTasks,
        outbox: Outbox,
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._agents = agents
        self._gate = gate
        self._background = background
        # Elicitations this run answered, or refused, by action id (queried by the
        # activity that waits; an activity never outlives the run that started it).
        self._answers: dict[str, ElicitationAnswer] = {}

    def register(self, control: ControlPlane) -> None:
        control.handle_signals(
            {
                SIGNAL_REFRESH_TOOLS: self._refresh_signal,
                SIGNAL_MCP_ELICITATION: self._elicitation_signal,
            }
        )

    # ---- catalogues ------------------------------------------------------------------

    async def ensure(
        self,
        prompt: PromptDef,
        wanted: dict[str, CatalogReason],
        *,
        side: Side,
        turn_id: str,
        step_id: str,
    ) -> None:
        """List the servers `prompt` uses that have no catalogue yet or are due again
        (`wanted`: what `McpBook.to_list` says of it)."""
        mem = self._mem
        # New runs ask no patch mid-run (see ContextKeeper.fit); older runs as before.
        if not wanted or not (mem.truthful_log or workflow.patched(PATCH_ID)):
            return
        # The catalogue's events follow what the thread produced before them.
        await self._outbox.flush()
        by_reason: dict[CatalogReason, list[str]] = {}
        for server, reason in wanted.items():
            by_reason.setdefault(reason, []).append(server)
        for reason, servers in by_reason.items():
            listed = await self._list(prompt.name, servers, reason, side, turn_id, step_id)
            mem.mcp.resolved(listed)
        for clash in mem.mcp.clashes(prompt):
            mem.emit(
                "runtime.warning",
                {"code": "mcp_tool_shadowed", "message": clash},
                turn_id=turn_id,
                step_id=step_id,
            )

    async def _list(
        self,
        prompt: str,
        servers: list[str],
        reason: CatalogReason,
        side: Side,
        turn_id: str,
        step_id: str,
    ) -> dict[str, McpServerCatalog]:
        mem, snapshot = self._mem, self._agents.snapshot()
        startup = max(snapshot.mcp_servers[s].startup_timeout_seconds for s in servers)
        request = ToolCatalogInput(
            thread_id=mem.thread_id,
            session_id=mem.session_id,
            snapshot_id=snapshot.snapshot_id,
            agent=mem.active_agent,
            side=side,
            prompt=prompt,
            servers=servers,
            reason=reason,
            turn_id=turn_id,
            step_id=step_id,
            event_id=mem.new_id("evt"),
        )
        try:
            result: ToolCatalogResult = await workflow.execute_activity(
                ACTIVITY_TOOL_CATALOG,
                request,
                result_type=ToolCatalogResult,
                start_to_close_timeout=timedelta(seconds=startup + CATALOG_SLACK_SECONDS),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"list the tools of MCP {', '.join(servers)} ({reason})",
            )
        except ActivityError as err:
            # Servers' own failures come back as data; this is the activity failing over
            # and over (no worker with MCP, the store down). The prompt runs without those
            # tools until `refresh_tools`, rather than failing every step on the same error.
            text = f"the tool catalogue could not be listed: {failure_text(err)}"
            incident = mem.incident("mcp_catalog_failed", text, turn_id=turn_id, step_id=step_id)
            mem.emit(
                "runtime.warning",
                {
                    "code": "mcp_catalog_failed",
                    "servers": servers,
                    "message": text,
                    "incident": incident,
                },
                turn_id=turn_id,
                step_id=step_id,
            )
            return {s: _unlisted(s, text, mem.timestamp()) for s in servers}
        return result.servers

    def _refresh_signal(self, name: str, values: list[Any]) -> None:
        request = parse_single(name, values, RefreshTools) if values else RefreshTools()
        defined = self._agents.snapshot().mcp_servers if self._mem.snapshot else {}
        servers = request.servers if request.servers is not None else list(defined)
        unknown = [s for s in servers if s not in defined]
        if unknown:
            self._mem.warn(
                "unknown_mcp_server",
                name,
                f"no MCP server {', '.join(map(repr, unknown))} in this thread; its servers: "
                f"{', '.join(defined) or '(none)'}",
            )
            return
        if not refused_after_terminate(self._mem, name):
            self._mem.mcp.request_refresh(servers)

    # ---- elicitation -----------------------------------------------------------------

    def answer(self, action_id: str) -> ElicitationAnswer | None:
        """The decision on elicitation `action_id`; None while a person may still answer."""
        return self._answers.get(action_id)

    def _elicitation_signal(self, name: str, values: list[Any]) -> None:
        request = parse_single(name, values, McpElicitation)
        mem, action_id = self._mem, request.action_id
        if action_id in mem.actions.pending or action_id in self._answers:
            return  # the activity's signal, sent again: one action is enough
        if mem.is_terminated() or mem.active_turn is None:
            self._answers[action_id] = ElicitationAnswer(action_id=action_id, action="cancel")
            mem.warn(
                "elicitation_refused",
                name,
                f"elicitation {action_id!r} from MCP server {request.server!r} came with no "
                "turn running; it was cancelled",
            )
            return
        self._background.run(self._ask(request))

    async def _ask(self, request: McpElicitation) -> None:
        mem = self._mem
        action = PendingAction(
            action_id=request.action_id,
            kind="elicitation",
            tool_call_id=request.tool_call_id,
            tool_name=request.tool_name,
            turn_id=request.turn_id,
            prompt=request.message,
            args={"server": request.server, "requestedSchema": request.requested_schema},
            decisions=["answer", "deny"],
            requested_at=mem.timestamp(),
            timeout_seconds=request.timeout_seconds,
            expires_at=expiry(mem, request.timeout_seconds),
            on_timeout="cancel" if request.timeout_seconds else None,
        )
        resolution = await self._gate.wait(action, step_id=request.step_id)
        self._answers[action.action_id] = _answer(resolution)


def _answer(resolution: ActionResolution) -> ElicitationAnswer:
    """A person's answer accepts; their refusal declines; a timeout or terminate cancels."""
    if resolution.decided_by in ("timeout", "terminate"):
        return ElicitationAnswer(action_id=resolution.action_id, action="cancel")
    if resolution.decision == "answer" and isinstance(resolution.answer, dict):
        return ElicitationAnswer(
            action_id=resolution.action_id, action="accept", content=resolution.answer
        )
    return ElicitationAnswer(action_id=resolution.action_id, action="decline")


def _unlisted(server: str, error: str, at: str) -> McpServerCatalog:
    """A catalogue for a server the activity could not list (not in the store: no id)."""
    return McpServerCatalog(
        catalog_id="", server=server, status="failed", error=error, resolved_at=at
    )
