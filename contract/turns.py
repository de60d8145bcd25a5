"""How a turn ended, as `submit_turn` with `wait: "completed"` returns it, and what a
thread carries of recent turns across continue-as-new.

`StopReason` and `UsageTotals` live here (re-exported by `contract.thread`) so that
`contract.messages` can name them without importing `contract.thread`, which imports it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from weft.contract.wire import CamelModel

StopReason = Literal[
    "session_stop",
    "session_fail",
    "stop_tool",
    "stop_on_response",
    "max_side_steps",
    "max_total_steps",
    "max_session_turns",
    "awaiting_human",
    "hook_blocked",
    "repeated_tool_error",
    "step_error",
    "aborted_by_user",
    "budget_exhausted",
    "interrupted",
]

TurnStatus = Literal["completed", "failed", "refused", "aborted", "cancelled"]


class UsageTotals(CamelModel):
    """Tokens and cost summed over every model attempt that reported usage."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = Field(default=None, description="None when a model has no price")


class TurnResult(CamelModel):
    """How one turn ended: its answer, why it stopped, what it cost, where its events end.

    `status` is `completed` when the turn reached a stop rule (the answer is `response`;
    `stopReason` says which rule, e.g. `max_side_steps`), `failed` when it ended with
    `step_error`, `session_fail` or `budget_exhausted` (`error` says why: for a budget,
    which limit is spent and how to raise it), `refused` when `policy: reject`
    found the thread busy or a hook refused the turn (`hook_blocked`), `aborted` when
    the thread was terminated before the turn ended (or the queued message was removed),
    and `cancelled` when `interrupt_turn` stopped it (`stopReason: interrupted`, `error`
    carries the reason).
    """

    turn_id: str = Field(
        description="the turn that carried the message: its own, or the running turn it "
        "joined (a message queued while a turn runs is read at that turn's next step)"
    )
    status: TurnStatus
    stop_reason: StopReason | None = None
    response: str | None = Field(
        default=None,
        description="the turn's visible answer: the final assistant text, or the lifecycle "
        "tool's response; None when a result is replayed after continue-as-new (read "
        "`messageId` from the store)",
    )
    message_id: str | None = Field(
        default=None, description="the stored message whose content is `response`"
    )
    usage: UsageTotals | None = Field(
        default=None, description="this thread's model usage during the turn"
    )
    error: str | None = Field(default=None, description="why the turn failed or was refused")
    events_cursor: str | None = Field(
        default=None,
        description="the id of the event that ended the turn; reading events after it "
        "(`tail_events(after=...)`) resumes where the turn ended",
    )


class TurnsCarry(CamelModel):
    """What a thread remembers of recent turns across continue-as-new.

    No turn-waiting update is ever pending when a run continues as new; the results are
    kept so an `ask` re-sent to the next run with the same update id gets its result
    instead of queuing the message again. Responses are dropped (they are in the store).
    """

    results: dict[str, TurnResult] = Field(
        default_factory=dict,
        description="by the turn id a message was queued with (a message that joined a "
        "running turn has that turn's result)",
    )
    asked: dict[str, str] = Field(
        default_factory=dict, description="update id of a turn-waiting submit_turn → turn id"
    )
    usage_at_start: UsageTotals | None = Field(
        default=None, description="the thread's usage when the turn in progress started"
    )
