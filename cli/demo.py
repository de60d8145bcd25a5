"""`weft demo`: a multi-step conversation with tools, a message queued while the thread is
busy, the transcript as it streams, and the thread's Temporal UI address."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TextIO

from weft.cli.render import TranscriptPrinter
from weft.client.threads import Threads, tail_events
from weft.contract.thread import ThreadRead
from weft.workers.config import WeftConfig
from weft.workers.dev_stack import DevStack

QUESTION = "What's the weather in Paris and Tokyo?"
FOLLOW_UP = "And what should I pack for Paris?"


async def run_demo(config: WeftConfig, out: TextIO, *, timeout: float = 120.0) -> int:
    """Run the demo on the embedded stack; returns a process exit code."""
    async with DevStack(config, ui=True) as stack:
        assert stack.client is not None
        threads = Threads(stack.client, task_queue=config.temporal.task_queue)
        printer = TranscriptPrinter(out)
        printer.user(QUESTION)
        handle = await threads.start("travel_assistant", messages=[QUESTION])
        store = stack.worker.store
        assert store is not None
        done = asyncio.Event()
        queued = False

        async def follow() -> None:
            nonlocal queued
            async for event in tail_events(store, handle.id, stop=done):
                printer.show(event)
                if event.type == "tool.started" and not queued:
                    # The thread is busy: this message waits and is injected before the
                    # next model call (Runtime §9).
                    queued = True
                    printer.user(f"{FOLLOW_UP}   (sent while the thread is busy)")
                    await threads.send(handle.id, FOLLOW_UP)

        tail = asyncio.create_task(follow())
        try:
            state = await asyncio.wait_for(
                _idle(threads, handle.id, queued_first=lambda: queued), timeout
            )
        finally:
            done.set()
            await tail
        out.write(
            f"\nthread {handle.id}: {state.status}, {state.counters.steps} steps, "
            f"{state.usage.input_tokens + state.usage.output_tokens} tokens, "
            f"stop reason {state.stop_reason}\n"
        )
        out.write(f"Temporal UI: {stack.thread_url(handle.id)}\n")
        if stack.started_server:
            out.write(
                "(the dev server stops with the demo; its history is kept in "
                ".weft/temporal.db: run `weft dev` to browse it at that address)\n"
            )
        out.flush()
    return 0


async def _idle(
    threads: Threads, thread_id: str, *, queued_first: Callable[[], bool]
) -> ThreadRead:
    while True:
        state = await threads.read(thread_id)
        if (
            state.status == "waiting_input"
            and not state.queue
            and queued_first()
            and state.counters.turns >= 1
        ):
            return state
        await asyncio.sleep(0.1)
