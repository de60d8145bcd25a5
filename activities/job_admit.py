"""`job.admit`: an item's place under its job's rate, in the ledger every worker shares.

The job's item starts take places under the key `job:<key>` (docs/jobs.md), separate from
a provider's own limit on `<key>`, so an item's model calls are not counted twice.
"""

from __future__ import annotations

from temporalio import activity

from weft.activities.rate_limits import RateLimit, RateLimiter
from weft.contract.jobs import ACTIVITY_JOB_ADMIT, AdmitInput
from weft.store import Store


def job_limit_key(key: str) -> str:
    """The ledger key a job's rate on `key` is counted under."""
    return f"job:{key}"


class JobAdmitActivities:
    """Waits, heartbeating, until an item may start under its job's rate."""

    def __init__(self, store: Store) -> None:
        self._limiter = RateLimiter(store.rate_limits)

    @activity.defn(name=ACTIVITY_JOB_ADMIT)
    async def admit(self, request: AdmitInput) -> float:
        """The seconds the item waited for its place."""
        rate = request.rate
        limit = RateLimit(
            requests_per_minute=rate.requests_per_minute,
            tokens_per_minute=rate.tokens_per_minute,
            window_seconds=rate.window_seconds,
            key=rate.key,
        )
        admission = await self._limiter.admit(job_limit_key(rate.key), limit, request.tokens)
        return admission.waited_seconds
