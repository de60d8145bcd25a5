"""Records the histories that tests/test_replay.py replays: `python tests/record_histories.py`.

Run it after a deliberate, versioned change to the workflow (with `workflow.patched`), and
commit the new files next to the old ones: old histories must keep replaying.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from support import (  # noqa: E402
    add_script,
    agent_definitions,
    ephemeral_dev_server,
    idle_after,
    start_thread,
    wait_until,
)

from client.connection import connect  # noqa: E402
from workers.agent_worker import AgentWorker  # noqa: E402
from workers.config import ProviderConfig, StoreConfig, WeftConfig  # noqa: E402
from workers.scripted_model import ScriptedModelServer  # noqa: E402
from workers.search_attributes import ensure_search_attributes  # noqa: E402

SCENARIOS: dict[str, dict[str, Any]] = {
    "tool_then_answer": {
        "replies": [
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
            {"text": "Sunny in Paris."},
            {"text": "Oslo is cold."},
        ]
    },
    "queued_while_busy": {
        "turns": [
            {
                "match": "*",
                "replies": [
                    {
                        "tool_calls": [{"name": "note", "arguments": {"text": "first"}}],
                        "delay_ms": 300,
                    },
                    {"text": "noted both"},
                    {"text": "Oslo is cold."},
                ],
            }
        ]
    },
    "terminated_mid_call": {"replies": [{"text": "never", "delay_ms": 10_000}]},
    "model_error_then_fallback": {"replies": [{"error": {"status": 400, "body": "bad"}}]},
}


async def record(out: Path) -> None:
    """Run each scenario on a fresh dev server and write its history as JSON."""
    dev = ephemeral_dev_server()
    await dev.start()
    try:
        client = await connect(dev.address)
        await ensure_search_attributes(client, "default")
        async with ScriptedModelServer() as scripted:
            for name, script in SCENARIOS.items():
                await _scenario(client, scripted, dev.address, name, script, out)
    finally:
        await dev.stop()


async def _scenario(
    client: Any,
    scripted: ScriptedModelServer,
    address: str,
    name: str,
    script: dict[str, Any],
    out: Path,
) -> None:
    tmp = Path(f"/tmp/weft-record-{uuid.uuid4().hex[:8]}")
    config = WeftConfig(
        store=StoreConfig(url=f"sqlite:///{tmp / 'weft.db'}"),
        definitions=str(tmp / "none"),
        providers={"scripted": ProviderConfig(kind="scripted")},
        root=tmp,
    )
    config.temporal.address = address
    model = add_script(scripted, script)
    async with AgentWorker(
        client,
        config,
        definitions=agent_definitions(model),
        task_queue=f"record-{name}",
        scripted=scripted,
    ) as worker:
        handle = await start_thread(
            client,
            worker.task_queue,
            options={"modelMaxAttempts": 1},
            messages=[{"role": "user", "content": "hello"}],
        )
        if name == "queued_while_busy":
            await wait_until(handle, lambda s: s.status == "running")
            await handle.signal("queue_message", {"role": "user", "content": "second"})
            await handle.signal("queue_message", {"role": 5})
            await handle.execute_update("submit_turn", {"role": "user", "content": "third"})
        if name == "terminated_mid_call":
            await wait_until(handle, lambda s: s.status == "running")
        else:
            await wait_until(
                handle,
                lambda s: (
                    s.status == "waiting_input"
                    and not s.queue
                    and (s.counters.turns >= 1 or s.stop_reason == "step_error")
                ),
            )
            await handle.signal("queue_tool", {"name": "weather", "args": {"city": "Oslo"}})
            await wait_until(handle, idle_after(0))
        await handle.signal("terminate", {"reason": "recorded"})
        await handle.result()
        history = await handle.fetch_history()
        (out / f"{name}.json").write_text(history.to_json())
        print(f"recorded {name}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(record(HERE / "histories"))
