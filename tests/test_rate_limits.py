"""Rate limits in a worker (docs/rate-limits.md): a call waits for its place, a wait
longer than the wall-time budget takes the fallback, and a 429 blocks its key for every
thread, recorded as `rate_limit.hit` with the key."""

from __future__ import annotations

import asyncio
import time

import pytest
from support import add_script, idle_after, start_thread, wait_until

from weft.activities.rate_limits import RateLimit
from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.workers.config import ProviderConfig, WeftConfig

KEY = "limited"


def _limited(weft_config: WeftConfig, **limit: float) -> RateLimit:
    """Add the provider `limited` (the scripted server, under `limit`) to the config."""
    rate = RateLimit.model_validate(limit)
    weft_config.providers[KEY] = ProviderConfig(kind="scripted", rate_limit=rate)
    return rate


def _definitions(primary: str, backup: str | None = None) -> Definitions:
    fallbacks = ["backup"] if backup else []
    models = [define_model(name="primary", provider=KEY, model=primary, fallbacks=fallbacks)]
    if backup:
        models.append(define_model(name="backup", provider="scripted", model=backup))
    return Definitions().add(
        *models,
        define_prompt(name="p", toolDescription="d", model="primary", prompt="Be brief."),
        define_agent(name="helper", sideA={"prompt": "p"}),
    )


def _received(server, script: str) -> list[float]:  # type: ignore[no-untyped-def]
    return [r["received_at"] for r in server.requests if r["script"] == script]


async def test_a_call_waits_for_its_place_in_the_window(
    start_worker, temporal_client, scripted_server, weft_config
):
    """With the window full, the model call waits inside the activity until its place
    comes, then the model answers: no fallback, no failed attempt, and the wait is a fact
    (`rate_limit.hit` from weft, with how long the request waited)."""
    rate = _limited(weft_config, requestsPerMinute=30, windowSeconds=3)  # 1 per 3 s
    primary = add_script(scripted_server, {"replies": [{"text": "in my turn"}]})
    worker = await start_worker(_definitions(primary))
    assert worker.store is not None
    taken = worker.store.rate_limits.reserve(KEY, rate.window(), 0)
    place = time.time() + taken.delay_seconds + rate.window().hold_seconds
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "in my turn"
    [arrived] = _received(scripted_server, primary)
    assert arrived >= place - 0.05
    events = worker.store.events.read(handle.id, limit=10_000)
    assert not [e for e in events if e.type in ("model.failed", "routing.fallback.applied")]
    [hit] = [e for e in events if e.type == "rate_limit.hit"]
    assert hit.payload["source"] == "weft" and hit.payload["limitKey"] == KEY
    assert hit.payload["waitedSeconds"] > 0 and hit.payload["willRetry"] is False


async def test_a_wait_past_the_wall_time_budget_takes_the_fallback(
    start_worker, temporal_client, scripted_server, weft_config
):
    """A place a minute away, in a thread with 20 s of wall time: the primary model fails
    with RateLimitWaitTooLong at once and the fallback answers (routing.fallback.applied)."""
    rate = _limited(weft_config, requestsPerMinute=1)
    primary = add_script(scripted_server, {"replies": [{"text": "never sent"}]})
    backup = add_script(scripted_server, {"replies": [{"text": "the fallback"}]})
    worker = await start_worker(_definitions(primary, backup))
    assert worker.store is not None
    worker.store.rate_limits.reserve(KEY, rate.window(), 0)
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "hi"}],
        options={"budget": {"maxWallSeconds": 20}},
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "the fallback"
    assert _received(scripted_server, primary) == []
    events = worker.store.events.read(handle.id, limit=10_000)
    [failed] = [e for e in events if e.type == "model.failed"]
    assert failed.payload["errorType"] == "RateLimitWaitTooLong"
    assert failed.payload["retryable"] is False and "'limited'" in failed.payload["error"]
    [fallback] = [e for e in events if e.type == "routing.fallback.applied"]
    assert fallback.payload["fromModel"] == "primary"
    assert fallback.payload["selectedModel"] == "backup"


async def test_a_429_blocks_the_key_for_every_thread(
    start_worker, temporal_client, scripted_server, weft_config
):
    """A 429 with Retry-After 2 blocks the key: another thread's request, started right
    after, reaches the provider only once the block is over; the hit names the key."""
    _limited(weft_config, requestsPerMinute=600)
    retry_after = 2.0
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "slow down",
                    "replies": [
                        {
                            "text": "after the wait",
                            "error": {"status": 429, "headers": {"Retry-After": "2"}},
                            "times": 1,
                        }
                    ],
                },
                {"match": "*", "replies": [{"text": "the other thread"}]},
            ]
        },
    )
    worker = await start_worker(_definitions(script))
    assert worker.store is not None
    first = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "slow down"}]
    )
    for _ in range(600):
        if worker.store.events.read(first.id, types=["rate_limit.hit"]):
            break
        await asyncio.sleep(0.05)
    [hit] = worker.store.events.read(first.id, types=["rate_limit.hit"])
    assert hit.payload["limitKey"] == KEY and hit.payload["retryAfterSeconds"] == retry_after
    second = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    state = await wait_until(second, idle_after(1))
    assert state.last_outcome == "the other thread"
    refused = next(r for r in scripted_server.requests if r["script"] == script)
    assert refused["status"] == 429
    later = [r["received_at"] for r in scripted_server.requests if r["script"] == script][1:]
    assert later and min(later) >= refused["received_at"] + retry_after
    assert (await wait_until(first, idle_after(1))).last_outcome == "after the wait"


@pytest.mark.parametrize("field", ["rateLimit", "rate_limit"])
def test_a_provider_rate_limit_is_read_from_config(field: str) -> None:
    """`rateLimit` in a provider entry becomes its limit, keyed by the provider's name."""
    entry = ProviderConfig.model_validate(
        {"kind": "openai", field: {"requestsPerMinute": 500, "tokensPerMinute": 200000}}
    )
    assert entry.rate_limit is not None and entry.rate_limit.requests_per_minute == 500
    assert entry.limit_key("openai") == "openai"
    shared = ProviderConfig.model_validate(
        {"kind": "openai", "rateLimit": {"requestsPerMinute": 5, "key": "team"}}
    )
    assert shared.limit_key("openai") == "team"
