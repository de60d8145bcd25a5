"""The model's context window: budgets, compaction boundaries and what crosses Temporal for them.

The workflow decides when to compact from counts the activities return (`ContextReport`);
`context.compact` summarises older turns into a `ContextBoundary` kept in the store; every
later `model.call` sends the system prompt, the boundary's summary, pinned messages and the
messages from `first_kept_position` on. The store keeps every original message.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from weft.contract.wire import CamelModel

SIGNAL_COMPACT = "compact"
QUERY_CONTEXT_BOUNDARY = "context_boundary_snapshot"
# The built-in tool that pages through an output the model saw only as a preview.
READ_OUTPUT_TOOL = "read_output"
# The error type of a request too long for its model: a provider's 400 (classified by
# activities/providers/errors.py), or `model.call` refusing to send what cannot fit.
CONTEXT_TOO_LONG = "ProviderContextLengthExceeded"
# A message with `metadata.pinned: true` stays in the context verbatim through compaction.
PINNED_METADATA_KEY = "pinned"

# Why a compaction ran: the projected request exceeded the budget; a provider (or the
# model activity's own check) refused the request as too long; a `compact` signal; a tool's
# `state.compact()`.
CompactionReason = Literal["budget", "overflow", "requested", "tool"]
# `summary`: older turns summarised by a model. `cut`: summarising failed, so older turns
# were dropped from the context with a marker saying so (they stay in the store).
BoundaryKind = Literal["summary", "cut"]

DEFAULT_COMPACTION_PROMPT = (
    "You compact the conversation of an AI agent so that it can continue within its context "
    "window. Write a faithful summary of the conversation you are given, folded into the "
    "previous summary if there is one. Keep every fact, decision, name, number, file path, "
    "output reference (weft://...) and open task the agent may need later; note what tools "
    "were called and what they returned. Leave out pleasantries. Write plain prose or terse "
    "bullet points, never a reply to the user."
)


class ContextOptions(CamelModel):
    """How a thread keeps its model context within the window (`ThreadOptions.context`)."""

    compaction_model: str | None = Field(
        default=None,
        description="the model definition that writes summaries; default: the model being called",
    )
    compaction_prompt: str | None = Field(
        default=None, description="system prompt of the summarising call; default: weft's"
    )
    tail_share: float = Field(
        default=0.35,
        gt=0.0,
        le=0.7,
        description="share of the prompt budget kept verbatim as the recent tail",
    )
    summary_share: float = Field(
        default=0.15, gt=0.0, le=0.3, description="share of the prompt budget a summary may use"
    )
    preview_share: float = Field(
        default=0.125,
        gt=0.0,
        le=0.5,
        description="share of the prompt budget one message may use before it is sent as a "
        "preview with a ref that `read_output` pages through",
    )


class CompactRequest(CamelModel):
    """The `compact` signal payload (optional: the signal may carry nothing)."""

    reason: str | None = Field(default=None, max_length=4096)


class ContextBoundary(CamelModel):
    """One compaction: what the model sees in place of the messages before it."""

    boundary_id: str
    thread_id: str
    kind: BoundaryKind
    reason: CompactionReason
    first_kept_position: int = Field(ge=0, description="messages from here on are sent whole")
    summarised_from_position: int = Field(ge=0)
    summarised_messages: int = Field(ge=0, description="messages folded into this boundary")
    pinned_message_ids: list[str] = Field(
        default_factory=list, description="messages before the boundary still sent verbatim"
    )
    summary: str
    model: str | None = None
    tokens_before: int = Field(ge=0, description="estimated prompt tokens before compacting")
    tokens_after: int = Field(ge=0, description="estimated prompt tokens after compacting")
    previous_boundary_id: str | None = None
    created_at: str
    turn_id: str | None = None
    step_id: str | None = None


class ContextWindow(CamelModel):
    """Which part of the transcript a model call sends (travels in `ModelCallInput`)."""

    boundary_id: str | None = None
    first_kept_position: int = Field(default=0, ge=0)
    token_scale: float = Field(
        default=1.0,
        ge=1.0,
        le=16.0,
        description="estimate correction learnt from a provider's context-length error",
    )
    preview_share: float = Field(
        default=0.125, gt=0.0, le=0.5, description="ContextOptions.preview_share of the thread"
    )
    learnt_limit: int | None = Field(
        default=None, gt=0, description="a smaller window a provider reported than declared"
    )


class ContextReport(CamelModel):
    """What one model call sent, for the workflow's next budgeting decision."""

    request_tokens: int = Field(ge=0, description="estimated tokens of the request, unscaled")
    request_bytes: int = Field(ge=0)
    prompt_budget: int = Field(ge=0)
    previews: int = Field(default=0, ge=0, description="messages sent as a preview")
    boundary_id: str | None = None


def boundary_snapshot(
    thread_id: str,
    boundaries: list[ContextBoundary],
    *,
    state: dict[str, Any] | None = None,
    warnings: list[str] | None = None,
    missing: list[str] | None = None,
) -> dict[str, Any]:
    """The Agent Runtime `context_boundary_snapshot` of a thread, newest boundary last."""
    latest = boundaries[-1] if boundaries else None
    return {
        "kind": "context_boundary_snapshot",
        "threadId": thread_id,
        "boundary": latest.model_dump(mode="json", by_alias=True) if latest else None,
        "selectedRefs": (
            [f"weft://threads/{thread_id}/messages/{mid}" for mid in latest.pinned_message_ids]
            + [f"weft://threads/{thread_id}/positions/{latest.first_kept_position}-"]
            if latest
            else [f"weft://threads/{thread_id}/positions/0-"]
        ),
        "compactionSummaries": [
            {
                "boundaryId": b.boundary_id,
                "kind": b.kind,
                "reason": b.reason,
                "summary": b.summary,
                "summarisedFromPosition": b.summarised_from_position,
                "firstKeptPosition": b.first_kept_position,
                "createdAt": b.created_at,
            }
            for b in boundaries
        ],
        "contextState": state or {},
        "contextWarnings": warnings or [],
        "missingFacts": missing or [],
    }
