"""The thread's read models (seed 001 `thread_read_model`, the Agent Runtime session
snapshot, message pages), built from the thread's memory alone.

Each reads a view naming what it shows (`ThreadMemory` satisfies them all); facts the
thread cannot know are listed in `unknown` rather than guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from weft.contract.actions import PermissionPolicy
from weft.contract.budget import BudgetState
from weft.contract.carry_parts import ActionBook, EffectBook, SubagentBook
from weft.contract.context import boundary_snapshot
from weft.contract.context_state import ContextState
from weft.contract.definitions import AgentDef
from weft.contract.messages import MessageMeta, MessagePage
from weft.contract.read_models import session_snapshot
from weft.contract.thread import (
    AgentInfo,
    Counters,
    QueueEntry,
    ThreadRead,
    UsageTotals,
)
from weft.workflows.views import AgentInForce, Identity, Stopped

MAX_MESSAGES_PAGE = 500


class PermissionFacts(Protocol):
    """What the permission state reads: the session's approvals and pending asks."""

    @property
    def actions(self) -> ActionBook: ...


class ThreadShown(Identity, Stopped, AgentInForce, PermissionFacts, Protocol):
    """What `thread_read` shows of the thread (read-only)."""

    @property
    def definitions_digest(self) -> str | None: ...

    @property
    def queue(self) -> Sequence[QueueEntry]: ...

    @property
    def subagents(self) -> SubagentBook: ...

    @property
    def counters(self) -> Counters: ...

    @property
    def terminated_at(self) -> str | None: ...

    @property
    def warnings(self) -> int: ...

    @property
    def parent_id(self) -> str | None: ...

    @property
    def incidents(self) -> Sequence[dict[str, Any]]: ...

    @property
    def cost_unknown(self) -> bool: ...

    @property
    def window(self) -> ContextState: ...

    @property
    def effects(self) -> EffectBook: ...

    @property
    def budget(self) -> BudgetState | None: ...

    def total_usage(self) -> UsageTotals: ...

    def timestamp(self) -> str: ...


class MessageIndex(Protocol):
    """The thread's message index: a recent window, and how many older entries it left."""

    @property
    def index(self) -> Sequence[MessageMeta]: ...

    @property
    def index_base(self) -> int: ...


class WindowShown(Protocol):
    """What the live `context_boundary_snapshot` reads: the model context in force."""

    @property
    def thread_id(self) -> str: ...

    @property
    def window(self) -> ContextState: ...


def thread_read(mem: ThreadShown) -> ThreadRead:
    """Everything `thread_read` shows, from the workflow's own state."""
    snapshot = mem.snapshot
    info = None
    if snapshot is None:  # preparing: only the start input is known
        agent, policy = mem.start.agent, {}
    else:
        agent = snapshot.agent_def(mem.active_agent).name
        info = agent_info(snapshot.agent_def(mem.active_agent))
        own = snapshot.agent
        prompt = snapshot.prompts[own.side(mem.active_side or "a").prompt]
        policy = permission_state(mem, own.permissions, prompt.permissions)
    unknown = []
    if mem.cost_unknown:
        unknown.append("usage.costUsd")  # a model without a price answered
    return ThreadRead(
        thread_id=mem.thread_id,
        agent=agent,
        session_id=mem.session_id,
        status=mem.status,
        active_turn_id=mem.active_turn,
        active_side=mem.active_side,
        queue=[e.to_item() for e in mem.queue],
        pending_actions=[
            a.model_dump(mode="json", by_alias=True) for a in mem.actions.pending.values()
        ],
        children=[
            e.model_dump(mode="json", by_alias=True) for e in mem.subagents.children.values()
        ],
        counters=mem.counters,
        usage=mem.total_usage(),
        last_outcome=mem.last_outcome,
        stop_reason=mem.stop_reason,
        terminated_at=mem.terminated_at,
        warnings=mem.warnings,
        parent_thread_id=mem.parent_id,
        incidents=list(mem.incidents),
        permission_state=policy,
        unknown=unknown,
        updated_at=mem.timestamp(),
        context=mem.window.read(),
        agent_info=info,
        scheduled_effects=[
            {**e.model_dump(mode="json", by_alias=True), "due": e.id in mem.effects.due}
            for e in mem.effects.listed()
        ],
        # Spend as last reported by the store (model calls and set_budget bring it).
        budget=mem.budget if mem.budget and not mem.budget.limits.is_empty() else None,
        definitions_digest=mem.definitions_digest,
    )


def agent_info(agent: AgentDef) -> AgentInfo:
    """The display fields of `agent` (title, description, icon, side labels)."""
    sides = {"a": agent.side_a, "b": agent.side_b}
    return AgentInfo(
        name=agent.name,
        title=agent.title,
        description=agent.description,
        icon=agent.icon,
        side_labels={k: side.label for k, side in sides.items() if side and side.label},
    )


def permission_state(
    mem: PermissionFacts, agent: PermissionPolicy | None, prompt: PermissionPolicy | None
) -> dict[str, Any]:
    """The active side's permission mode, rules' origin and session approvals."""
    mode = (prompt.mode if prompt else None) or (agent.mode if agent else None)
    if agent is None and prompt is None:
        return {"policy": "none", "sessionAllowedTools": sorted(mem.actions.session_allowed_tools)}
    return {
        "policy": "configured",
        "mode": mode or "default",
        "rules": {
            "agent": len(agent.rules) if agent else 0,
            "prompt": len(prompt.rules) if prompt else 0,
        },
        "sessionAllowedTools": sorted(mem.actions.session_allowed_tools),
        "pendingApprovals": sum(
            1 for a in mem.actions.pending.values() if a.kind == "tool_permission"
        ),
    }


def snapshot_window(mem: MessageIndex, read: ThreadRead, page: Any) -> dict[str, Any]:
    """The session snapshot with the window of messages before `page.before` (newest last).

    `{before?, limit?}`: `before` is the `history.olderCursor` of the previous window.
    """
    page = page if isinstance(page, dict) else {}
    index = mem.index
    before = _int_or(page.get("before"), len(index) and index[-1].position + 1)
    limit = min(max(_int_or(page.get("limit"), 50), 1), MAX_MESSAGES_PAGE)
    window = [m for m in index if m.position < before][-limit:]
    return session_snapshot(
        read,
        [m.model_dump(mode="json", by_alias=True) for m in window],
        older_cursor=window[0].position if window and window[0].position > 0 else None,
        total_messages=mem.index_base + len(index),
    )


def context_snapshot(mem: WindowShown) -> dict[str, Any]:
    """The `context_boundary_snapshot` of a live thread: the boundary in force and the counts."""
    state = mem.window
    missing = []
    if state.compactions > 1:
        missing.append(
            "compactionSummaries: a live thread holds only its latest boundary; the earlier "
            "ones are in the store (`weft thread context` reads them)"
        )
    return boundary_snapshot(
        mem.thread_id,
        [state.boundary] if state.boundary else [],
        state=state.read(),
        warnings=list(state.warnings),
        missing=missing,
    )


def message_page(mem: MessageIndex, page: Any) -> MessagePage:
    """Message metadata from `cursor` (a position), at most `limit` (<= 500) of them.

    After continue-as-new the thread indexes a recent window only: `oldestPosition` says
    where it starts, and older metadata is read from the store.
    """
    page = page if isinstance(page, dict) else {}
    cursor = _int_or(page.get("cursor"), 0)
    limit = min(max(_int_or(page.get("limit"), 100), 1), MAX_MESSAGES_PAGE)
    index = mem.index
    chosen = [m for m in index if m.position >= cursor][:limit]
    more = len(chosen) == limit and chosen and chosen[-1].position < index[-1].position
    return MessagePage(
        messages=chosen,
        next_cursor=chosen[-1].position + 1 if more else None,
        oldest_position=index[0].position if mem.index_base and index else None,
    )


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
