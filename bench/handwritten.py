"""A hand-written workflow doing the benchmark's work with no runtime around it.

One activity calls the model and stores the assistant message; one runs the note tool and
stores its result. It is the yardstick DESIGN.md sets for per-step overhead: what a
Temporal engineer would write by hand for this one scenario.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    # Activities' I/O modules are only used outside the sandbox, by the activity methods.
    import httpx

    from weft.activities.providers import ChatRequest, OpenAIChatProvider
    from weft.contract.messages import Message
    from weft.store import Store


class HandwrittenActivities:
    """The model call and the tool call, each persisting its own result."""

    def __init__(self, store: Store, http: httpx.AsyncClient, base_url: str) -> None:
        self._store = store
        self._provider = OpenAIChatProvider(http, base_url=base_url, api_key=None)

    @activity.defn(name="hand.model")
    async def model(self, args: dict[str, Any]) -> dict[str, Any]:
        """Call the model with the thread's history and store the reply."""
        thread_id = args["thread_id"]
        rows = await asyncio.to_thread(self._store.messages.list, thread_id)
        history = [{"role": "user", "content": "take notes"}] + [
            {
                "role": m.role,
                "content": m.content,
                "tool_call_id": m.tool_call_id,
                **({"tool_calls": [c.model_dump() for c in m.tool_calls]} if m.tool_calls else {}),
            }
            for m in rows
        ]
        reply = await self._provider.complete(ChatRequest(model=args["model"], messages=history))
        message = Message(
            id=uuid.uuid4().hex,
            thread_id=thread_id,
            position=args["position"],
            role="assistant",
            content=reply.content,
            tool_calls=reply.tool_calls or None,
            created_at=0,
        )
        await asyncio.to_thread(self._store.messages.append, [message])
        return {"tool_calls": [c.model_dump() for c in reply.tool_calls]}

    @activity.defn(name="hand.tool")
    async def tool(self, args: dict[str, Any]) -> str:
        """Run the note tool and store its result."""
        thread_id, call = args["thread_id"], args["call"]
        text = json.loads(call["function"]["arguments"])["text"]
        notes = await asyncio.to_thread(self._store.values.get, thread_id, "notes") or []
        await asyncio.to_thread(self._store.values.set, thread_id, "notes", [*notes, text])
        result = f"noted ({len(notes) + 1})"
        message = Message(
            id=uuid.uuid4().hex,
            thread_id=thread_id,
            position=args["position"],
            role="tool",
            content=json.dumps(result),
            tool_call_id=call["id"],
            created_at=0,
        )
        await asyncio.to_thread(self._store.messages.append, [message])
        return result


@workflow.defn(name="HandwrittenLoop")
class HandwrittenLoop:
    """Model, then each tool call, until the model stops calling tools."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> int:
        position, steps = 0, 0
        timeout = timedelta(seconds=60)
        while True:
            steps += 1
            position += 1
            reply = await workflow.execute_activity(
                "hand.model", {**args, "position": position}, start_to_close_timeout=timeout
            )
            if not reply["tool_calls"]:
                return steps
            for call in reply["tool_calls"]:
                position += 1
                await workflow.execute_activity(
                    "hand.tool",
                    {**args, "call": call, "position": position},
                    start_to_close_timeout=timeout,
                )
