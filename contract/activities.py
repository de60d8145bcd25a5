"""Activity inputs and results. Each carries ids, never the whole conversation."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from weft.contract.budget import Budget, BudgetState
from weft.contract.context import (
    CompactionReason,
    ContextBoundary,
    ContextOptions,
    ContextReport,
    ContextWindow,
)
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import DefinitionsRefreshInput
from weft.contract.events import Event
from weft.contract.hooks import HookBlock
from weft.contract.mcp import McpCallOutcome, McpToolTarget
from weft.contract.messages import Message, Side, ToolCall
from weft.contract.prompt_tools import PromptScope
from weft.contract.subagents import ParentLink
from weft.contract.wire import CamelModel, SnakeModel

# Stable activity names: renaming one breaks replay of running threads.
ACTIVITY_THREAD_INIT = "thread.init"
ACTIVITY_MODEL_CALL = "model.call"
ACTIVITY_TOOL_CALL = "tool.call"
ACTIVITY_STORE_FLUSH = "store.flush"
ACTIVITY_FILES_COPY = "files.copy"
ACTIVITY_CONTEXT_COMPACT = "context.compact"


class ThreadInitInput(CamelModel):
    """Snapshot the agent's definitions and record the thread's start."""

    thread_id: str
    agent: str
    session_id: str | None = None
    user_id: str | None = None
    parent_thread_id: str | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    scoped_env_request: str | None = Field(
        default=None, description="a §7.5 request whose stored values join the thread's env"
    )
    outbox: list[Event] = Field(default_factory=list)
    parent: ParentLink | None = Field(
        default=None,
        description="a subagent's parent: its snapshot and after_subagent_created hooks",
    )
    budget: Budget | None = Field(
        default=None, description="options.budget; the agent's own budget is applied here"
    )
    budget_root: str | None = Field(
        default=None, description="a subagent's budget root: it opens no ledger of its own"
    )
    tenant: str | None = Field(
        default=None, description="the thread's tenant; None is `default` (docs/tenants.md)"
    )


class ThreadInitResult(CamelModel):
    """The frozen definitions the thread runs with for its whole life."""

    snapshot: DefinitionSnapshot
    budget: BudgetState | None = Field(
        default=None, description="a root's ledger as opened, when it has limits"
    )


class Usage(CamelModel):
    """Token usage of one model attempt."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


class ModelCallInput(CamelModel):
    """One step's model call: persist the new messages, assemble context, call, persist."""

    thread_id: str
    session_id: str | None = None
    snapshot_id: str
    side: Side
    model: str = Field(description="the model definition to call (the prompt's, or a fallback)")
    agent: str | None = Field(default=None, description="the active agent after a handoff")
    turn_id: str
    step_id: str
    step: int
    assistant_message_id: str
    assistant_position: int
    new_messages: list[Message] = Field(default_factory=list)
    outbox: list[Event] = Field(default_factory=list)
    window: ContextWindow = Field(
        default_factory=ContextWindow, description="the part of the transcript to send"
    )
    scope: PromptScope | None = Field(
        default=None, description="inside a prompt tool: its prompt, parent call and depth"
    )
    budget_root: str | None = Field(
        default=None,
        description="the thread whose budget ledger this call is checked against and charged "
        "to (None in histories before budgets: neither)",
    )
    env_writes: int | None = Field(
        default=None,
        description="the thread's env writes the workflow has applied (Counters.env_writes): "
        "the worker may reuse the thread's env it read at this count; None: read it",
    )
    mcp_catalogs: dict[str, str] = Field(
        default_factory=dict,
        description="the catalogue id of each MCP server the thread has listed (the prompt's "
        "are offered)",
    )
    definitions_check: DefinitionsRefreshInput | None = Field(
        default=None,
        description="a session's first call of a `latest` thread: the thread's definitions "
        "version, checked against the worker's before anything is written or sent (a newer "
        "one fails the call with DefinitionsChanged, carrying it)",
    )


class ModelCallResult(CamelModel):
    """The assistant message (already persisted) and what it cost."""

    message: Message
    usage: Usage
    cost_usd: float | None
    model: str = Field(description="the model definition that answered (after fallbacks)")
    finish_reason: str | None = None
    context: ContextReport | None = Field(
        default=None, description="what the request held (None in histories before budgets)"
    )
    budget: BudgetState | None = Field(
        default=None, description="the tree's ledger after this call was charged, if it has one"
    )


class ToolResult(SnakeModel):
    """The spec's tool result; snake_case names as in Standard Agents."""

    status: Literal["success", "error"]
    result: Any = None
    error: str | None = None
    error_code: str | None = None
    error_data: Any = None
    stack: str | None = None
    attachments: list[str] | None = None


class Intent(CamelModel):
    """A ThreadState change requested inside an activity, applied later by the workflow.

    An activity never signals its own workflow: the workflow applies intents
    deterministically after the result that carried them is persisted.
    """

    kind: Literal[
        "queue_message",
        "queue_tool",
        "terminate",
        "set_status",
        "notify_parent",
        "compact",
        "schedule_effect",
        "remove_effect",
        "inject_message",
        "messages_deleted",
        "set_env",
    ]
    data: dict[str, Any] = Field(default_factory=dict)


class ToolCallInput(CamelModel):
    """Run one tool call and persist its result message."""

    thread_id: str
    session_id: str | None = None
    snapshot_id: str
    side: Side
    agent: str | None = Field(default=None, description="the active agent after a handoff")
    turn_id: str
    step_id: str
    tool_call: ToolCall
    result_message_id: str
    result_position: int
    outbox: list[Event] = Field(default_factory=list)
    prior_messages: list[Message] = Field(
        default_factory=list, description="messages to persist first (a queued tool's call)"
    )
    scope: PromptScope | None = Field(
        default=None, description="inside a prompt tool: its prompt, parent call and depth"
    )
    mcp: McpToolTarget | None = Field(
        default=None, description="an MCP tool: its server and its name there"
    )
    env_writes: int | None = Field(
        default=None,
        description="the thread's env writes the workflow has applied (Counters.env_writes): "
        "the worker may reuse the thread's user and env it read at this count; None: read them",
    )


class ToolCallResult(CamelModel):
    """The tool message (already persisted; its content is the JSON `ToolResult`) and intents.

    The result travels once, inside the message, so history holds each tool output once.
    """

    message: Message
    intents: list[Intent] = Field(default_factory=list)
    blocked: HookBlock | None = Field(
        default=None,
        description="a before_* hook refused the result; the stored message says so and the "
        "turn ends with hook_blocked",
    )
    mcp: McpCallOutcome | None = Field(
        default=None,
        description="an MCP call whose server reported list_changed: its tool list digest now",
    )


class FlushInput(CamelModel):
    """Write what the workflow produced on its own: events and messages."""

    thread_id: str
    events: list[Event] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    thread_row: dict[str, Any] | None = None


class CopyFilesInput(CamelModel):
    """Copy files from one thread's filesystem into another's (Runtime §8.1, §8.2).

    Each path lands under `target_dir` in the target thread with its base name; a name
    already taken there gets a numeric suffix. Bytes are shared underneath (immutable
    blobs), so a copy costs one row.
    """

    source_thread_id: str
    target_thread_id: str
    paths: list[str]
    target_dir: str = "/attachments"
    copy_id: str = Field(description="idempotency key: a retried copy returns the same paths")


class CopyFilesResult(CamelModel):
    """The target-thread paths, in the order of `paths`."""

    paths: list[str]


class CompactInput(CamelModel):
    """`context.compact`: persist what the step carries, then write one boundary."""

    thread_id: str
    session_id: str | None = None
    snapshot_id: str
    side: Side
    agent: str | None = None
    model: str = Field(description="the model whose budget the context must fit")
    boundary_id: str = Field(description="idempotency key: a retried compaction writes it once")
    window: ContextWindow = Field(default_factory=ContextWindow)
    options: ContextOptions = Field(default_factory=ContextOptions)
    reason: CompactionReason
    harder: bool = Field(default=False, description="after an overflow: keep half the tail")
    cut_only: bool = Field(default=False, description="drop older turns without a summary")
    turn_id: str | None = None
    step_id: str | None = None
    new_messages: list[Message] = Field(default_factory=list)
    outbox: list[Event] = Field(default_factory=list)
    mcp_catalogs: dict[str, str] = Field(
        default_factory=dict,
        description="the thread's MCP catalogue ids: their tools count in the request measured",
    )


class CompactResult(CamelModel):
    """The boundary written, or None when nothing before the recent tail could be compacted."""

    boundary: ContextBoundary | None = None
    tokens_before: int = 0
    note: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
