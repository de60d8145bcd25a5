"""The HTTP API's request and reply bodies (camelCase JSON), and the error replies each route
documents. The thread's own models (`ThreadRead`, `SubmitTurnResult`, `TurnResult`,
`Message`) come from `contract/` unchanged."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator
from pydantic.json_schema import SkipJsonSchema

from weft.api.gateway.models import ErrorBody
from weft.client.thread_status import ThreadState
from weft.contract.actions import ActionKind, ApprovalScope, Decision
from weft.contract.mcp import MCP_SERVER_NAME_PATTERN
from weft.contract.messages import QueueableRole, QueuedMessage
from weft.contract.tenants import TenantName
from weft.contract.thread import ThreadOptions
from weft.contract.wire import CamelModel

# Ids a caller chooses (thread ids) become URL path segments and visibility query values:
# letters, digits and `_ . : @ = + -`, starting with a letter or digit.
SAFE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@=+\-]{0,199}$"
# Filter values of `GET /threads` (agent, session): the same characters, up to 255.
SAFE_VALUE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@=+\-]{0,254}$"
# Metadata the runtime itself sets on a queued message: a caller setting `contentRef`
# could make the thread read any stored blob it can name.
RESERVED_METADATA = ("contentRef", "contentBytes", "queued_tool")
MAX_TURN_WAIT_SECONDS = 300.0
# The most servers one refresh may name (a thread defines a handful).
MAX_REFRESH_SERVERS = 100


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for error replies: each an `ErrorBody`; 401 and 403 (a key
    without the route's scope: api/auth.py) always."""
    return {status: {"model": ErrorBody} for status in sorted({401, 403, *statuses})}


# Every POST may fail on its body or its Idempotency-Key before it acts: broken JSON or a
# bad key (400), a body too large (413), not JSON (415), a key used for another request
# (422) or one still in progress (409).
POST_ERRORS = (400, 409, 413, 415, 422)


def _check_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    for name in RESERVED_METADATA:
        if name in metadata:
            raise ValueError(f"{name!r} is set by weft itself, not by the caller")
    return metadata


CallerMetadata = Annotated[dict[str, Any], AfterValidator(_check_metadata)]


class MessageInput(QueuedMessage):
    """A message to queue on a thread (`POST /threads/{id}/messages`): the `queue_message`
    payload, with what differs over HTTP stated here.

    Content over 64 KiB of UTF-8 is stored as a blob first; the thread's history holds a
    preview and the model reads the whole text (the body limit is 1 MiB), so the signal's
    content cap does not apply to the body. The role defaults to `user`, and metadata keys
    weft sets itself are refused.
    """

    role: QueueableRole = "user"
    content: str = Field(description="the message text")
    metadata: CallerMetadata = Field(
        default_factory=dict,
        description="free-form; `contentRef`, `contentBytes` and `queued_tool` are weft's own",
    )


class StartMessage(QueuedMessage):
    """A message queued with the thread's start: the `queue_message` fields.

    Content is bounded by the body limit only: over 64 KiB it is stored as a blob first.
    """

    content: str = Field(description="the message text")
    metadata: CallerMetadata = Field(default_factory=dict)


# Start-input fields a thread gets from weft itself, never from an HTTP caller; sent
# anyway, each is refused (422 naming it) rather than silently dropped.
_NOT_FROM_HTTP = {
    "parent": "links a subagent to its parent thread; subagents are created by their parent",
    "arguments": "a subagent's creation arguments, given by its parent thread",
    "scoped_env_request": "a scoped-variable request of a deferred subagent (Runtime §7.5)",
    "carry_over": "set by the thread itself when it continues as new",
}


class StartThread(CamelModel):
    """`POST /threads`: the start input a caller may set (`contract/thread.py`)."""

    agent: str = Field(min_length=1, max_length=255, description="the agent to run")
    messages: list[str | StartMessage] = Field(
        default_factory=list,
        description="queued at once; a string is a user message",
    )
    thread_id: str | None = Field(
        default=None,
        pattern=SAFE_ID_PATTERN,
        description="the new thread's id; default: derived from the Idempotency-Key when "
        "one is sent, else random",
    )
    env: dict[str, Any] = Field(
        default_factory=dict,
        description='env values, secret unless given as {"value": ..., "type": "text"}',
    )
    session_id: str | None = Field(default=None, max_length=255)
    user_id: str | None = Field(default=None, max_length=255)
    options: ThreadOptions | None = Field(default=None, description="runtime limits")
    tenant: TenantName | None = Field(
        default=None,
        description="the tenant the thread belongs to: the server's token and `admin` keys "
        "name any (default: `default`); a tenant's key only its own (another is 403)",
    )
    parent: SkipJsonSchema[Any] = Field(default=None, exclude=True)
    arguments: SkipJsonSchema[Any] = Field(default=None, exclude=True)
    scoped_env_request: SkipJsonSchema[Any] = Field(default=None, exclude=True)
    carry_over: SkipJsonSchema[Any] = Field(default=None, exclude=True)

    @field_validator(*_NOT_FROM_HTTP, mode="before")
    @classmethod
    def _not_from_http(cls, value: Any, info: ValidationInfo) -> Any:
        raise ValueError(f"not accepted over HTTP: {_NOT_FROM_HTTP[str(info.field_name)]}")

    def start_fields(self) -> dict[str, Any]:
        """The other start-input fields, as `Threads.start` takes them."""
        fields: dict[str, Any] = {"env": self.env}
        if self.session_id is not None:
            fields["session_id"] = self.session_id
        if self.user_id is not None:
            fields["user_id"] = self.user_id
        if self.options is not None:
            fields["options"] = self.options.model_dump(by_alias=True)
        return fields

    def start_messages(self) -> list[str | dict[str, Any]]:
        """The messages as `Threads.start` takes them."""
        return [m if isinstance(m, str) else m.model_dump(by_alias=True) for m in self.messages]


class ThreadStarted(CamelModel):
    """`POST /threads` reply."""

    thread_id: str
    run_id: str | None = Field(description="the first run of the thread's workflow")
    confirmed: bool = Field(
        description="the worker accepted the thread; false when no worker gave its "
        "verdict in time (none may be running: the thread runs once one does)"
    )


ExecutionStatus = Literal[
    "running", "completed", "failed", "canceled", "terminated", "timed_out", "continued_as_new"
]


class ThreadSummary(CamelModel):
    """One thread of `GET /threads`, from Temporal's visibility store."""

    thread_id: str
    agent: str | None
    status: ThreadState = Field(
        description="the thread's status, in the vocabulary of the `status` filter and of "
        "`weft thread list` (docs/thread-status.md)"
    )
    thread_status: str | None = Field(
        description="the raw WeftStatus search attribute the thread last recorded"
    )
    session_id: str | None
    awaiting_action: ActionKind | None = Field(
        description="what the thread waits for from a human, if anything: a question "
        "(ask_human), a tool permission, or an MCP server's request for input (elicitation)"
    )
    started_at: str = Field(description="ISO-8601 UTC")


class ThreadList(CamelModel):
    """`GET /threads` reply: a page of threads, newest first."""

    threads: list[ThreadSummary]
    next_page_token: str | None = Field(description="pass as `pageToken` for the next page")


class TurnInput(MessageInput):
    """`POST /threads/{id}/turns`: a message and how to submit it (`submit_turn`)."""

    policy: Literal["enqueue", "interrupt", "reject"] = Field(
        default="enqueue",
        description="while a turn runs: queue it, interrupt the model call, or refuse it",
    )
    wait: Literal["accepted", "completed"] = Field(
        default="accepted", description="reply once queued, or once the turn has ended"
    )
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TURN_WAIT_SECONDS,
        description="with wait=completed: how long to wait (default 60 s)",
    )

    @field_validator("timeout_seconds")
    @classmethod
    def _timeout_needs_completed(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("wait") != "completed":
            raise ValueError("applies to wait=completed only")
        return value


class TurnWaiting(CamelModel):
    """`POST /threads/{id}/turns` with wait=completed: the turn outlasted the timeout."""

    status: Literal["waiting"] = "waiting"
    update_id: str = Field(description="the submit_turn update the turn belongs to")
    timeout_seconds: float
    message: str = Field(description="what to do next")


class ActionAnswer(CamelModel):
    """`POST /threads/{id}/actions/{actionId}`: the answer to a pending action."""

    decision: Decision = Field(
        description="approve or deny a tool permission; answer (or deny) an ask_human "
        "question or an MCP elicitation"
    )
    scope: ApprovalScope = Field(
        default="once", description="`session` approves the tool for the rest of the session"
    )
    answer: Any = Field(
        default=None,
        description="the answer, with decision=answer only: text for ask_human, an object "
        "of the requested fields for an elicitation",
    )
    reason: str | None = Field(default=None, max_length=4096)


class QueueEditRequested(CamelModel):
    """`POST /threads/{id}/queue/{queueId}/remove|promote` reply: the signal was sent."""

    thread_id: str
    queue_id: str
    action: Literal["remove", "promote"]
    status: Literal["requested"] = "requested"


McpServerName = Annotated[str, Field(pattern=MCP_SERVER_NAME_PATTERN, max_length=255)]


class RefreshToolsInput(CamelModel):
    """`POST /threads/{id}/tools/refresh` body (optional)."""

    servers: list[McpServerName] | None = Field(
        default=None,
        max_length=MAX_REFRESH_SERVERS,
        description="the MCP servers to list again; default: every server the thread defines",
    )


class ToolsRefreshRequested(CamelModel):
    """`POST /threads/{id}/tools/refresh` reply: the thread lists the servers' tools again
    before its next model call (a server it does not define is a `runtime.warning`)."""

    thread_id: str
    refresh_requested: list[str] | None = Field(
        description="the servers named, or null for every server the thread defines"
    )


class TerminateInput(CamelModel):
    """`POST /threads/{id}/terminate` body."""

    reason: str | None = Field(default=None, max_length=4096)


class InterruptInput(CamelModel):
    """`POST /threads/{id}/interrupt` body (optional): 001's `interrupt_turn`."""

    reason: str | None = Field(default=None, max_length=4096, description="why it stops")
    turn_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="stop only this turn: another running, or none, is a no-op",
    )


class TerminateRequested(CamelModel):
    """`POST /threads/{id}/terminate` reply: the thread finishes what it must and closes."""

    thread_id: str
    status: Literal["terminating"] = "terminating"


__all__ = [
    "MAX_TURN_WAIT_SECONDS",
    "POST_ERRORS",
    "SAFE_ID_PATTERN",
    "SAFE_VALUE_PATTERN",
    "ActionAnswer",
    "ExecutionStatus",
    "MessageInput",
    "QueueEditRequested",
    "RefreshToolsInput",
    "StartMessage",
    "StartThread",
    "TerminateInput",
    "TerminateRequested",
    "ThreadList",
    "ThreadStarted",
    "ThreadSummary",
    "ToolsRefreshRequested",
    "TurnInput",
    "TurnWaiting",
]
