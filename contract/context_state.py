"""What the thread knows about its model context: the boundary in force and the token counts.

Pure and content-free apart from the latest summary (a few KB, needed by the boundary
query). Counts come from the activities: `model.call` reports the estimated size of the
request it sent; messages added since are estimated here as they are indexed, so the
workflow can tell before the next call whether it would exceed the budget. The state is
carried across continue-as-new as it is (`ThreadCarryOver.context`).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from weft.contract.context import (
    CompactionReason,
    ContextBoundary,
    ContextOptions,
    ContextReport,
    ContextWindow,
)
from weft.contract.context_tokens import ContextLimits, message_tokens, preview_cap_tokens
from weft.contract.definitions import ModelDef
from weft.contract.messages import Message
from weft.contract.wire import CamelModel

MAX_WARNINGS = 10
# A provider's count over weft's estimate is learnt as a scale, bounded so one odd reply
# cannot make every later request tiny.
MAX_TOKEN_SCALE = 16.0


class ContextState(CamelModel):
    """The context window of a thread; carried across continue-as-new as it is."""

    boundary: ContextBoundary | None = None
    compactions: int = 0
    # Estimated tokens of the last request `model.call` sent (unscaled).
    last_request_tokens: int = 0
    # Estimated tokens of the messages added since that request.
    pending_tokens: int = 0
    token_scale: float = 1.0
    # The window a provider reported in a context-length error, when smaller than declared.
    learnt_limit: int | None = None
    # The prompt budget of the model last called (None before the first call).
    prompt_budget: int | None = None
    requested: CompactionReason | None = None
    warnings: list[str] = Field(default_factory=list)

    # ---- counts ----------------------------------------------------------------------

    def note_message(self, message: Message, options: ContextOptions) -> None:
        """A message joined the transcript: it adds to the next request's size."""
        self.pending_tokens += message_tokens(message, self._cap(options))

    def observe(self, report: ContextReport | None) -> None:
        """`model.call` reports what it sent; histories from before budgets report nothing."""
        if report is None:
            return
        self.last_request_tokens = report.request_tokens
        self.prompt_budget = report.prompt_budget
        self.pending_tokens = 0

    def projected_tokens(self) -> int:
        """The estimated size of the next request, corrected by the learnt scale."""
        return math.ceil((self.last_request_tokens + self.pending_tokens) * self.token_scale)

    def compaction_due(self, model: ModelDef) -> CompactionReason | None:
        """Why to compact before the next request to `model`: a request for it, or the
        request's projected size over the model's prompt budget; None when it fits."""
        return self.requested or ("budget" if self.over_budget(model) else None)

    def over_budget(self, model: ModelDef) -> bool:
        """Whether the next request to `model` would exceed its prompt budget."""
        projected = self.projected_tokens()
        return (
            projected > ContextLimits.for_model(model, learnt_limit=self.learnt_limit).prompt_budget
        )

    def learn(
        self, provider_limit: int | None, provider_tokens: int | None, estimated_tokens: int | None
    ) -> None:
        """A provider refused a request: its window may be smaller than declared, and it
        counted `provider_tokens` where weft estimated `estimated_tokens`."""
        if provider_limit:
            self.learnt_limit = min(provider_limit, self.learnt_limit or provider_limit)
        if provider_tokens and estimated_tokens:
            ratio = provider_tokens / estimated_tokens
        else:
            ratio = self.token_scale * 1.25  # no counts in the error: be more careful anyway
        self.token_scale = min(MAX_TOKEN_SCALE, max(self.token_scale, ratio))

    # ---- boundaries ------------------------------------------------------------------

    def window(self, options: ContextOptions) -> ContextWindow:
        """What the next model call sends: from the boundary in force."""
        boundary = self.boundary
        return ContextWindow(
            boundary_id=boundary.boundary_id if boundary else None,
            first_kept_position=boundary.first_kept_position if boundary else 0,
            token_scale=self.token_scale,
            preview_share=options.preview_share,
            learnt_limit=self.learnt_limit,
        )

    def apply(self, boundary: ContextBoundary) -> None:
        """A compaction wrote `boundary`: later requests start from it."""
        self.boundary = boundary
        self.compactions += 1
        self.last_request_tokens = boundary.tokens_after
        self.pending_tokens = 0
        self.requested = None

    def warn(self, text: str) -> None:
        self.warnings.append(text[:300])
        del self.warnings[:-MAX_WARNINGS]

    # ---- read models ---------------------------------------------------------------

    def read(self) -> dict[str, Any]:
        """`thread_read.context`: tokens against the budget and the last compaction."""
        boundary = self.boundary
        return {
            "promptBudget": self.prompt_budget,
            "lastRequestTokens": self.last_request_tokens,
            "projectedTokens": self.projected_tokens(),
            "tokenScale": self.token_scale,
            "learntLimit": self.learnt_limit,
            "compactions": self.compactions,
            "compactionRequested": self.requested,
            "lastCompaction": (
                boundary.model_dump(mode="json", by_alias=True, exclude={"summary"})
                if boundary
                else None
            ),
            "warnings": list(self.warnings),
        }

    def _cap(self, options: ContextOptions) -> int | None:
        if self.prompt_budget is None:
            return None
        return preview_cap_tokens(self.prompt_budget, options.preview_share)
