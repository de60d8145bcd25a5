"""Budgets: what a thread and its whole tree of subagents may spend.

A budget is set per thread (`options.budget`), per agent (`budget:` in its definition) and
raised at run time (the `set_budget` update / signal). The stricter value of each limit
wins between the thread's options and its agent's definition. A thread's budget bounds
its whole tree: children spend from their root's ledger (`budget_root`), so a parent's
budget is the cap of everything it started.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from weft.contract.wire import CamelModel

# The checked update has a name of its own, as the effects' do (`schedule_effect_checked`):
# the signal only warns about bad input, the update refuses it.
UPDATE_SET_BUDGET = "set_budget_checked"
SIGNAL_SET_BUDGET = "set_budget"
# The ApplicationError type of a model call refused because the tree's budget is spent.
BUDGET_EXHAUSTED = "BudgetExhausted"

# A fraction of any limit at which `quota.low` is emitted (once per limit and raise).
LOW_FRACTION = 0.8

BudgetLimitName = Literal["tokens", "costUsd", "modelCalls", "wallSeconds"]
LIMIT_NAMES: tuple[BudgetLimitName, ...] = ("tokens", "costUsd", "modelCalls", "wallSeconds")


class Budget(CamelModel):
    """Hard caps; None means no cap on that measure."""

    max_tokens: int | None = Field(
        default=None, ge=1, le=10**12, description="input + output tokens of every attempt"
    )
    max_cost_usd: float | None = Field(
        default=None, gt=0, le=10**7, description="priced cost of every attempt, in USD"
    )
    max_model_calls: int | None = Field(
        default=None, ge=1, le=10**9, description="model attempts, failed ones included"
    )
    max_wall_seconds: float | None = Field(
        default=None,
        gt=0,
        le=10 * 365 * 24 * 3600.0,
        description="seconds since the budget's root thread started",
    )

    def is_empty(self) -> bool:
        return all(
            value is None
            for value in (
                self.max_tokens,
                self.max_cost_usd,
                self.max_model_calls,
                self.max_wall_seconds,
            )
        )

    def stricter(self, other: Budget | None) -> Budget:
        """Each limit the smaller of the two (None is no limit)."""
        if other is None:
            return self

        def pick(a: float | None, b: float | None) -> float | None:
            if a is None:
                return b
            if b is None:
                return a
            return min(a, b)

        return Budget(
            max_tokens=pick(self.max_tokens, other.max_tokens),
            max_cost_usd=pick(self.max_cost_usd, other.max_cost_usd),
            max_model_calls=pick(self.max_model_calls, other.max_model_calls),
            max_wall_seconds=pick(self.max_wall_seconds, other.max_wall_seconds),
        )

    def limit(self, name: BudgetLimitName) -> float | None:
        """The cap on one measure, by its wire name (None: no cap)."""
        return {
            "tokens": self.max_tokens,
            "costUsd": self.max_cost_usd,
            "modelCalls": self.max_model_calls,
            "wallSeconds": self.max_wall_seconds,
        }[name]

    def changed(self, request: SetBudget) -> Budget:
        """These limits with `request` applied: given limits replace, `clear` removes."""
        given = request.budget.model_dump(exclude_none=True, by_alias=False)
        cleared = {_FIELD_OF[name]: None for name in request.clear}
        return self.model_copy(update={**given, **cleared})


class BudgetSpend(CamelModel):
    """What a budget's tree has spent so far, every attempt counted."""

    tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    wall_seconds: float = 0.0
    cost_unknown: bool = Field(
        default=False, description="some attempt used a model without a price"
    )

    def value(self, name: BudgetLimitName) -> float:
        """The spend on one measure, by its wire name."""
        return {
            "tokens": float(self.tokens),
            "costUsd": self.cost_usd,
            "modelCalls": float(self.model_calls),
            "wallSeconds": self.wall_seconds,
        }[name]


class BudgetState(CamelModel):
    """A budget against its spend, as `thread_read.budget` shows it."""

    root_thread_id: str = Field(description="the thread whose ledger this tree spends from")
    limits: Budget
    spent: BudgetSpend = Field(default_factory=BudgetSpend)
    blocked: BudgetLimitName | None = Field(
        default=None, description="the limit that stopped the tree, until the budget is raised"
    )

    def spent_limit(self) -> BudgetLimitName | None:
        """The first limit whose spend has reached its cap, or None."""
        for name in LIMIT_NAMES:
            cap = self.limits.limit(name)
            if cap is not None and self.spent.value(name) >= cap:
                return name
        return None

    def low_limits(self) -> list[BudgetLimitName]:
        """The limits at or past `LOW_FRACTION` of their cap."""
        return [
            name
            for name in LIMIT_NAMES
            if (cap := self.limits.limit(name)) is not None
            and self.spent.value(name) >= LOW_FRACTION * cap
        ]


class SetBudget(CamelModel):
    """The `set_budget` update / signal: new limits for a thread's tree (root threads only).

    Limits given replace the current ones; `clear` removes the named caps. Raising a spent
    budget lets a blocked tree go on, and with `resume` the root continues its stopped turn.
    """

    budget: Budget = Field(default_factory=Budget)
    clear: list[BudgetLimitName] = Field(default_factory=list)
    resume: bool = Field(
        default=True,
        description="when the thread's last turn stopped because the budget was spent, "
        "continue it at once (a new turn, without a new message)",
    )

    @model_validator(mode="after")
    def _something_to_do(self) -> SetBudget:
        if self.budget.is_empty() and not self.clear:
            raise ValueError("set_budget needs at least one limit in `budget` or in `clear`")
        return self


_FIELD_OF: dict[BudgetLimitName, str] = {
    "tokens": "max_tokens",
    "costUsd": "max_cost_usd",
    "modelCalls": "max_model_calls",
    "wallSeconds": "max_wall_seconds",
}
