"""Model-call helpers shared by `model.call` and `context.compact`: the provider of a model,
what a call cost, and a context-length error carrying weft's own estimate."""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.exceptions import ApplicationError

from weft.activities.providers import ChatProvider
from weft.contract.activities import Usage
from weft.contract.context import CONTEXT_TOO_LONG, ContextReport
from weft.contract.definitions import ModelDef


def provider_for(providers: Mapping[str, ChatProvider], model: ModelDef) -> ChatProvider:
    """The worker's provider for `model`, or a non-retryable error naming what is missing."""
    provider = providers.get(model.provider)
    if provider is None:
        raise ApplicationError(
            f"model {model.name!r} uses provider {model.provider!r}, "
            "which this worker has not configured",
            type="ProviderNotConfigured",
            non_retryable=True,
        )
    return provider


def with_estimate(err: ApplicationError, report: ContextReport) -> ApplicationError:
    """A provider's context-length error, with weft's estimate of the request added so the
    workflow can learn how far off the estimate was."""
    if err.type != CONTEXT_TOO_LONG:
        return err
    first = err.details[0] if err.details else None
    details = {
        **(first if isinstance(first, dict) else {}),
        "estimated_tokens": report.request_tokens,
    }
    return ApplicationError(err.message, details, type=err.type, non_retryable=err.non_retryable)


def cost_of(model: ModelDef, usage: Usage) -> float | None:
    """USD for this call, from per-million prices; None when the model has no prices."""
    if model.input_price is None and model.output_price is None:
        return None
    cached_price = model.cached_price if model.cached_price is not None else model.input_price
    fresh = max(usage.input_tokens - usage.cached_tokens, 0)
    total = (
        fresh * (model.input_price or 0)
        + usage.cached_tokens * (cached_price or 0)
        + usage.output_tokens * (model.output_price or 0)
    )
    return round(total / 1_000_000, 10)
