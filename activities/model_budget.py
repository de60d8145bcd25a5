"""What one model attempt spent, as `cost.recorded`, who pays it, and the refusals of a
spent budget and a spent tenant quota.

`model.call` charges every attempt it sent, failed ones included (docs/budgets.md). A
reply carries the provider's usage; a failed attempt has none, so its tokens are an
honest estimate: the request's estimated input tokens when the provider had begun to
answer (something streamed), plus what streamed, marked `estimated`. An attempt refused
before anything streamed (an HTTP error status) counts as a call with 0 tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from temporalio.exceptions import ApplicationError

from weft.activities.model_support import cost_of
from weft.activities.providers import ChatReply, Delta
from weft.contract.activities import Usage
from weft.contract.budget import BUDGET_EXHAUSTED, BudgetLimitName, BudgetState
from weft.contract.context import ContextReport
from weft.contract.definitions import ModelDef
from weft.store.budgets import Charge
from weft.store.tenant_quotas import QuotaExceeded, TenantQuota

# Characters per token when counting streamed text without a tokenizer (as the estimator).
_CHARS_PER_TOKEN = 4


class StreamMeter:
    """Counts what an attempt streamed, so a failed attempt's output can be estimated."""

    def __init__(self) -> None:
        self.chars = 0

    def count(self, delta: Delta) -> None:
        self.chars += len(delta.text)


@dataclass(frozen=True)
class Payer:
    """Who a call's attempts are charged to: its tree's ledger (None: histories from before
    budgets, charged to none), and its tenant's quota row when the call's ledger read
    found one (None: the tenant has no quota, and its charge costs no statement)."""

    root_thread_id: str | None
    quota_tenant: str | None


class AttemptCost:
    """One attempt's usage and price, and how it is recorded and charged."""

    def __init__(self, model: ModelDef, attempt: int, usage: Usage, *, estimated: bool) -> None:
        self.model = model
        self.attempt = attempt
        self.usage = usage
        self.estimated = estimated
        self.cost_usd = cost_of(model, usage)

    @classmethod
    def of_reply(cls, model: ModelDef, attempt: int, reply: ChatReply) -> AttemptCost:
        usage = Usage(
            input_tokens=reply.usage.input_tokens,
            output_tokens=reply.usage.output_tokens,
            cached_tokens=reply.usage.cached_tokens,
        )
        return cls(model, attempt, usage, estimated=False)

    @classmethod
    def of_failure(
        cls,
        model: ModelDef,
        attempt: int,
        reply: ChatReply | None,
        report: ContextReport,
        meter: StreamMeter,
    ) -> AttemptCost:
        """A failed attempt: the provider's usage when a reply came (then refused, e.g.
        invalid structured output), else the estimate described in the module docstring."""
        if reply is not None:
            return cls.of_reply(model, attempt, reply)
        began = meter.chars > 0
        usage = Usage(
            input_tokens=report.request_tokens if began else 0,
            output_tokens=math.ceil(meter.chars / _CHARS_PER_TOKEN),
        )
        return cls(model, attempt, usage, estimated=True)

    def payload(self, root_thread_id: str | None) -> dict[str, Any]:
        """The `cost.recorded` payload."""
        return {
            "model": self.model.name,
            "attempt": self.attempt,
            "inputTokens": self.usage.input_tokens,
            "outputTokens": self.usage.output_tokens,
            "cachedTokens": self.usage.cached_tokens,
            "costUsd": self.cost_usd,
            "estimated": self.estimated,
            "rootThreadId": root_thread_id,
        }

    def charge(self, payer: Payer, event_id: str) -> Charge | None:
        """The ledger charge, or None when the call is charged to no ledger."""
        if payer.root_thread_id is None:
            return None
        tokens = self.usage.input_tokens + self.usage.output_tokens
        return Charge(
            payer.root_thread_id, event_id, tokens, self.cost_usd, quota_tenant=payer.quota_tenant
        )


def budget_exhausted(state: BudgetState, limit: BudgetLimitName) -> ApplicationError:
    """The non-retryable refusal of a call whose tree has spent `limit`; the workflow ends
    the turn with `budget_exhausted`."""
    cap = state.limits.limit(limit)
    root = state.root_thread_id
    return ApplicationError(
        f"the budget of thread {root} is spent ({limit}: {state.spent.value(limit):g} of "
        f"{cap:g}); the model was not called. Raise it with set_budget on thread {root}",
        state.model_dump(mode="json", by_alias=True),
        type=BUDGET_EXHAUSTED,
        non_retryable=True,
    )


def tenant_quota_exhausted(quota: TenantQuota) -> ApplicationError:
    """The non-retryable refusal of a call whose tenant has spent its quota
    (docs/tenants.md#quotas); the workflow ends the turn with `budget_exhausted`, as for a
    spent thread budget."""
    limit = quota.spent_limit()
    blocked = quota.blocked_payload(quota.tenant)
    assert limit is not None and blocked is not None  # called for a spent quota only
    spent, cap = blocked["spent"], blocked["limitValue"]
    refused = QuotaExceeded(quota.tenant, limit, spent, cap)
    return ApplicationError(
        f"{refused}; the model was not called",
        {"tenant": quota.tenant, "quota": limit, "spent": spent, "limit": cap},
        type=BUDGET_EXHAUSTED,
        non_retryable=True,
    )
