"""Temporal history grows linearly: content lives in the store, not in every payload."""

from __future__ import annotations

from google.protobuf.json_format import MessageToJson
from support import StartWorker, add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio.client import Client

from weft.workers.scripted_model import ScriptedModelServer


async def _history_bytes_per_step(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    steps: int,
) -> tuple[float, int]:
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "note", "arguments": {"text": "a note of moderate length " * 4}}
                    ],
                    "repeat": steps,
                },
                {"text": "finished"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"maxTotalSteps": steps + 5},
        messages=[{"role": "user", "content": "take notes"}],
    )
    state = await wait_until(handle, idle_after(1), timeout=240)
    assert state.counters.steps == steps + 1
    history = await handle.fetch_history()
    size = len(
        MessageToJson(
            history.to_proto() if hasattr(history, "to_proto") else _proto(history)
        ).encode()
    )
    return size / (steps + 1), len(history.events)


def _proto(history):
    from temporalio.api.history.v1 import History

    return History(events=history.events)


async def test_history_bytes_per_step_stay_flat(start_worker, temporal_client, scripted_server):
    """History bytes per step of a 200-step thread are within 30% of a 20-step thread's."""
    short, _ = await _history_bytes_per_step(start_worker, temporal_client, scripted_server, 20)
    long, events = await _history_bytes_per_step(
        start_worker, temporal_client, scripted_server, 200
    )
    ratio = long / short
    print(
        f"history bytes/step: 20 steps {short:.0f}, 200 steps {long:.0f}, ratio {ratio:.2f}, "
        f"{events} events"
    )
    assert 0.7 < ratio < 1.3
