"""Per-step overhead of an AgentThread against the same work in a plain in-process loop.

Run: `.venv/bin/python bench/bench_steps.py [--steps N]`. Three runs of the same scenario
(each step: one model call returning one tool call, then the tool), all calling the scripted
model server through the same OpenAI adapter, running the same tool and storing the same
messages in SQLite: a plain in-process loop, a hand-written Temporal workflow
(bench/handwritten.py), and an AgentThread. Prints milliseconds per step, the ratios, and
the AgentThread's history bytes per step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from google.protobuf.json_format import MessageToJson
from temporalio.api.history.v1 import History
from temporalio.client import Client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from support import (  # noqa: E402
    add_script,
    agent_definitions,
    idle_after,
    local_stack,
    scratch_config,
    start_thread,
    wait_until,
)

from weft.activities.providers import ChatRequest, OpenAIChatProvider  # noqa: E402
from weft.contract.messages import Message  # noqa: E402
from weft.store import Store  # noqa: E402
from weft.workers.agent_worker import AgentWorker  # noqa: E402
from weft.workers.scripted_model import ScriptedModelServer  # noqa: E402

TOOL_ARGS = {"text": "a benchmark note"}


def _script(steps: int) -> dict[str, object]:
    return {
        "replies": [
            {"tool_calls": [{"name": "note", "arguments": TOOL_ARGS}], "repeat": steps},
            {"text": "done"},
        ]
    }


async def plain_loop(scripted: ScriptedModelServer, model: str, steps: int, db: Path) -> float:
    """The same model calls, tool runs and message writes, with no Temporal: seconds."""
    from support import NoteArgs, note

    store = Store.open(f"sqlite:///{db}")
    thread_id = f"plain-{uuid.uuid4().hex[:8]}"

    class State:  # the note tool only needs the key-value store
        async def get_value(self, key: str) -> object:
            return await asyncio.to_thread(store.values.get, thread_id, key)

        async def set_value(self, key: str, value: object) -> None:
            await asyncio.to_thread(store.values.set, thread_id, key, value)

    history: list[dict[str, Any]] = [{"role": "user", "content": "take notes"}]
    position = 0
    async with httpx.AsyncClient() as http:
        provider = OpenAIChatProvider(http, base_url=scripted.openai_base_url, api_key=None)
        began = time.perf_counter()
        for _ in range(steps + 1):
            messages = await asyncio.to_thread(store.messages.list, thread_id)
            reply = await provider.complete(ChatRequest(model=model, messages=history))
            position += 1
            assistant = Message(
                id=uuid.uuid4().hex,
                thread_id=thread_id,
                position=position,
                role="assistant",
                content=reply.content,
                tool_calls=reply.tool_calls or None,
                created_at=0,
            )
            await asyncio.to_thread(store.messages.append, [assistant])
            history.append(
                {
                    "role": "assistant",
                    "content": reply.content,
                    "tool_calls": [c.model_dump() for c in reply.tool_calls],
                }
            )
            for call in reply.tool_calls:
                result = await note(State(), NoteArgs.model_validate_json(call.function.arguments))
                position += 1
                tool_message = Message(
                    id=uuid.uuid4().hex,
                    thread_id=thread_id,
                    position=position,
                    role="tool",
                    content=json.dumps(result),
                    tool_call_id=call.id,
                    created_at=0,
                )
                await asyncio.to_thread(store.messages.append, [tool_message])
                history.append(
                    {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                )
            del messages
        elapsed = time.perf_counter() - began
    store.close()
    return elapsed


async def temporal_thread(
    client: Client, scripted: ScriptedModelServer, model: str, steps: int, tmp: Path
) -> tuple[float, int, int]:
    """Seconds for the thread's steps, its history bytes (JSON) and event count."""
    config = scratch_config(tmp)
    async with AgentWorker(
        client,
        config,
        definitions=agent_definitions(model),
        task_queue=f"bench-{uuid.uuid4().hex[:8]}",
        scripted=scripted,
    ) as worker:
        handle = await start_thread(client, worker.task_queue, options={"maxTotalSteps": steps + 5})
        await wait_until(handle, lambda s: s.status == "waiting_input")
        began = time.perf_counter()
        await handle.signal("queue_message", {"role": "user", "content": "take notes"})
        await wait_until(handle, idle_after(1), timeout=600)
        elapsed = time.perf_counter() - began
        history = await handle.fetch_history()
        size = len(MessageToJson(History(events=history.events)).encode())
        await handle.signal("terminate", {})
        return elapsed, size, len(history.events)


async def handwritten(
    client: Client, scripted: ScriptedModelServer, model: str, steps: int, tmp: Path
) -> float:
    """Seconds for the same steps in the hand-written workflow of bench/handwritten.py."""
    from floor import stock_sandbox
    from handwritten import HandwrittenActivities, HandwrittenLoop
    from temporalio.worker import Worker

    store = Store.open(f"sqlite:///{tmp / f'hand-{uuid.uuid4().hex[:6]}.db'}")
    queue = f"hand-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient() as http:
        acts = HandwrittenActivities(store, http, scripted.openai_base_url)
        async with Worker(
            client,
            task_queue=queue,
            workflows=[HandwrittenLoop],
            activities=[acts.model, acts.tool],
            workflow_runner=stock_sandbox(),
        ):
            began = time.perf_counter()
            done = await client.execute_workflow(
                "HandwrittenLoop",
                {"thread_id": f"h-{uuid.uuid4().hex[:8]}", "model": model},
                id=f"hand-{uuid.uuid4().hex}",
                task_queue=queue,
            )
            elapsed = time.perf_counter() - began
    store.close()
    assert done == steps + 1, done
    return elapsed


async def main(steps: int) -> None:
    """Run both sides once each (after a warm-up) and print the figures."""
    # The scripted server keeps no requests: each holds its whole transcript, and in this
    # process they would grow the heap every garbage collection walks, for every side.
    async with local_stack(max_records=0) as (client, scripted, address):
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            await temporal_thread(client, scripted, add_script(scripted, _script(5)), 5, tmp)
            await plain_loop(scripted, add_script(scripted, _script(5)), 5, tmp / "w.db")
            await handwritten(client, scripted, add_script(scripted, _script(5)), 5, tmp)
            plain = await plain_loop(
                scripted, add_script(scripted, _script(steps)), steps, tmp / "plain.db"
            )
            hand = await handwritten(
                client, scripted, add_script(scripted, _script(steps)), steps, tmp
            )
            durable, size, events = await temporal_thread(
                client, scripted, add_script(scripted, _script(steps)), steps, tmp
            )
    per_plain = plain / (steps + 1) * 1000
    per_durable = durable / (steps + 1) * 1000
    per_hand = hand / (steps + 1) * 1000
    print(f"steps (model call + tool call each): {steps + 1}")
    print(f"plain in-process loop (no Temporal):  {per_plain:7.2f} ms/step")
    print(f"hand-written workflow (same work):    {per_hand:7.2f} ms/step")
    print(f"AgentThread (weft):                   {per_durable:7.2f} ms/step")
    print(
        f"weft vs plain loop: +{per_durable - per_plain:.2f} ms/step, "
        f"ratio {per_durable / per_plain:.2f}x"
    )
    print(
        f"weft vs hand-written workflow: +{per_durable - per_hand:.2f} ms/step, "
        f"ratio {per_durable / per_hand:.2f}x (DESIGN.md target: <= 1.3x)"
    )
    print(
        f"history: {size / (steps + 1):7.0f} bytes/step (JSON), {events} events, "
        f"{events / (steps + 1):.1f} events/step"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    asyncio.run(main(parser.parse_args().steps))
