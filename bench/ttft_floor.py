"""The hand-written yardstick of bench/bench_ttft.py: a chat workflow that streams through an
activity, as a Temporal engineer would write it for this one path.

The workflow holds the transcript; an `ask` update appends the user's text, runs one
activity that calls the model with weft's OpenAI adapter (streaming, over httpx, to the
scripted server) and returns the reply. The activity hands the first delta to the caller
in process (a callback): no store, no events, no delivery cost. The workflow lives in its
own module because the sandbox cannot re-import a workflow from __main__.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    # Used only by the activity, outside the sandbox.
    import httpx

    from weft.activities.providers import ChatRequest, Delta, OpenAIChatProvider

WORKFLOW = "TtftHandwritten"
STREAM_ACTIVITY = "ttft.stream"
UPDATE_ASK = "ask"
SIGNAL_STOP = "stop"


class StreamActivities:
    """The streamed model call; `on_enter(ask_id)` hears of each call's start and
    `on_first(ask_id)` of its first delta."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        on_first: Callable[[str], None],
        on_enter: Callable[[str], None] = lambda _: None,
    ) -> None:
        self._provider = OpenAIChatProvider(http, base_url=base_url, api_key=None)
        self._on_first = on_first
        self._on_enter = on_enter

    @activity.defn(name=STREAM_ACTIVITY)
    async def stream(self, args: dict[str, Any]) -> str:
        """One streamed completion over the transcript the workflow passes in."""
        self._on_enter(args["ask_id"])
        first = True

        async def on_delta(delta: Delta) -> None:
            nonlocal first
            if first and delta.text:
                first = False
                self._on_first(args["ask_id"])

        reply = await self._provider.complete(
            ChatRequest(model=args["model"], messages=args["messages"]), on_delta=on_delta
        )
        return reply.content or ""


@workflow.defn(name=WORKFLOW)
class TtftHandwritten:
    """A chat: each `ask` update is one streamed model call over the transcript."""

    def __init__(self) -> None:
        self._stopped = False
        self._transcript: list[dict[str, Any]] = []

    @workflow.run
    async def run(self, args: dict[str, Any]) -> None:
        self._transcript = [{"role": "system", "content": args["system"]}]
        await workflow.wait_condition(lambda: self._stopped)

    @workflow.update(name=UPDATE_ASK)
    async def ask(self, request: dict[str, Any]) -> str:
        self._transcript.append({"role": "user", "content": request["text"]})
        reply: str = await workflow.execute_activity(
            STREAM_ACTIVITY,
            {"model": request["model"], "messages": self._transcript, "ask_id": request["id"]},
            start_to_close_timeout=timedelta(seconds=60),
        )
        self._transcript.append({"role": "assistant", "content": reply})
        return reply

    @workflow.signal(name=SIGNAL_STOP)
    def stop(self) -> None:
        self._stopped = True
