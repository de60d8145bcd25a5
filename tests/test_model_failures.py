"""Model failures: retries with Retry-After, fallbacks in order, and step_error when all fail."""

from __future__ import annotations

from support import add_script, idle_after, start_thread, wait_until

from weft.definitions import Definitions, define_agent, define_model, define_prompt


def _with_fallback(primary: str, backup: str) -> Definitions:
    return Definitions().add(
        define_model(name="primary", provider="scripted", model=primary, fallbacks=["backup"]),
        define_model(name="backup", provider="scripted", model=backup),
        define_prompt(name="p", toolDescription="d", model="primary", prompt="Be brief."),
        define_agent(name="helper", sideA={"prompt": "p"}),
    )


async def test_fallback_answers_after_primary_fails(start_worker, temporal_client, scripted_server):
    """A non-retryable primary failure moves to the fallback model, which answers."""
    primary = add_script(
        scripted_server,
        {"replies": [{"error": {"status": 400, "body": "model overloaded with nonsense"}}]},
    )
    backup = add_script(scripted_server, {"replies": [{"text": "backup here"}]})
    worker = await start_worker(_with_fallback(primary, backup))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "backup here" and state.stop_reason == "stop_on_response"
    reply = worker.store.messages.list(handle.id)[-1]
    assert reply.metadata["model"] == "backup"
    failed = worker.store.events.read(handle.id, types=["model.failed"])
    assert [e.payload["retryable"] for e in failed] == [False]
    assert "HTTP 400" in failed[0].payload["error"]


async def test_retry_after_is_honoured_then_succeeds(
    start_worker, temporal_client, scripted_server
):
    """A 429 with Retry-After is retried by Temporal and the second attempt answers."""
    primary = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "text": "after the wait",
                    "error": {"status": 429, "headers": {"Retry-After": "1"}},
                    "times": 1,
                }
            ]
        },
    )
    worker = await start_worker(_with_fallback(primary, primary))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "after the wait"
    requested = worker.store.events.read(handle.id, types=["model.requested"])
    assert [e.payload["attempt"] for e in requested] == [1, 2]
    gap = _seconds_between(requested[0].timestamp, requested[1].timestamp)
    assert gap >= 0.9, f"the retry came {gap:.2f} s after a Retry-After of 1 s"


async def test_all_models_failing_ends_the_turn_not_the_thread(
    start_worker, temporal_client, scripted_server
):
    """When the model and its fallbacks fail, the turn ends with step_error and the thread
    still takes the next message."""
    bad = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "again", "replies": [{"text": "recovered"}]},
                {"match": "*", "replies": [{"error": {"status": 401, "body": "no key"}}]},
            ]
        },
    )
    worker = await start_worker(_with_fallback(bad, bad))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(
        handle, lambda s: s.status == "waiting_input" and s.stop_reason == "step_error"
    )
    assert "HTTP 401" in (state.last_outcome or "")
    assert [m.role for m in worker.store.messages.list(handle.id)] == ["user"]
    await handle.signal("queue_message", {"role": "user", "content": "again"})
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "recovered"


def _seconds_between(first: str, second: str) -> float:
    from datetime import datetime

    parse = lambda text: datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    return (parse(second) - parse(first)).total_seconds()
