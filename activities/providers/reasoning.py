"""A prompt's `reasoning` object, and how each provider's request expresses it.

OpenAI Chat Completions takes an effort (`reasoning_effort`); Anthropic Messages takes a
token budget (`thinking.budget_tokens`). A prompt may give either; the other is derived
from the table below, so one definition works on both.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Effort -> Anthropic thinking budget. Anthropic's floor is 1,024 tokens.
EFFORT_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
}
EFFORTS = ("none", *EFFORT_BUDGETS)
DEFAULT_EFFORT = "medium"


class ReasoningConfig(BaseModel):
    """`reasoning: {effort?, maxTokens? (or budgetTokens), enabled?}`; unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    effort: str | None = None
    max_tokens: int | None = Field(default=None, ge=1, alias="maxTokens")
    budget_tokens: int | None = Field(default=None, ge=1, alias="budgetTokens")
    enabled: bool = True

    @model_validator(mode="after")
    def _one_budget(self) -> ReasoningConfig:
        if self.max_tokens is not None and self.budget_tokens is not None:
            raise ValueError("give maxTokens or budgetTokens, not both (they are synonyms)")
        if self.effort is not None and self.effort not in EFFORTS:
            raise ValueError(f"effort {self.effort!r} is not one of {', '.join(EFFORTS)}")
        return self

    @property
    def budget(self) -> int | None:
        """The explicit token budget, if any."""
        return self.max_tokens if self.max_tokens is not None else self.budget_tokens

    def openai_effort(self) -> str:
        """`reasoning_effort`: the effort, else the smallest one whose budget covers maxTokens."""
        if self.effort is not None:
            return self.effort
        if self.budget is None:
            return DEFAULT_EFFORT
        for effort in ("low", "medium"):
            if self.budget <= EFFORT_BUDGETS[effort]:
                return effort
        return "high"

    def anthropic_budget(self) -> int | None:
        """`thinking.budget_tokens`: maxTokens, else the effort's budget; None for effort none."""
        if self.budget is not None:
            return self.budget
        effort = self.effort or DEFAULT_EFFORT
        return EFFORT_BUDGETS.get(effort)


def reasoning_of(raw: dict[str, Any] | None) -> ReasoningConfig | None:
    """The prompt's reasoning settings, None when absent or disabled (validated at start-up)."""
    if raw is None:
        return None
    config = ReasoningConfig.model_validate(raw)
    return config if config.enabled else None
