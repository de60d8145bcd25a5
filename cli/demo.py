"""`weft demo`: a multi-step conversation with tools, a message queued while the thread is
busy, a tool call that waits for a human's approval, the transcript as it streams, and the
thread's Temporal UI address."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from temporalio.client import Client, WorkflowUpdateFailedError

from weft.cli.render import TranscriptPrinter
from weft.client.actions import respond_checked, response
from weft.client.threads import Threads, tail_events
from weft.contract.thread import ThreadRead
from weft.workers.config import WeftConfig
from weft.workers.dev_stack import DevStack

QUESTION = "What's the weather in Paris and Tokyo?"
FOLLOW_UP = "And what should I pack for Paris?"
# Long enough to answer from another terminal, short enough that the demo stays quick.
APPROVE_AFTER = 10.0
INBOX_PORT = 8088  # `weft serve`'s default port


async def run_demo(
    config: WeftConfig,
    out: TextIO,
    *,
    timeout: float = 120.0,
    approve_after: float = APPROVE_AFTER,
) -> int:
    """Run the demo on the embedded stack; returns a process exit code."""
    async with DevStack(config, ui=True) as stack:
        client = stack.client
        assert client is not None
        threads = Threads(client, task_queue=config.temporal.task_queue)
        printer = TranscriptPrinter(out)
        printer.user(QUESTION)
        handle = await threads.start("travel_assistant", messages=[QUESTION])
        store = stack.worker.store
        assert store is not None
        done = asyncio.Event()
        queued = False
        approvals: list[asyncio.Task[None]] = []

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
                if event.type == "action.required" and event.action_id:
                    _how_to_answer(out, handle.id, event.action_id, approve_after)
                    approvals.append(
                        asyncio.create_task(
                            _approve_unless_answered(
                                client,
                                threads,
                                handle.id,
                                event.action_id,
                                approve_after,
                                out,
                            )
                        )
                    )

        tail = asyncio.create_task(follow())
        try:
            state = await asyncio.wait_for(
                _idle(threads, handle.id, queued_first=lambda: queued), timeout
            )
        finally:
            done.set()
            await tail
            for task in approvals:
                task.cancel()
        out.write(
            f"\nthread {handle.id}: {state.status}, {state.counters.steps} steps, "
            f"{state.usage.input_tokens + state.usage.output_tokens} tokens, "
            f"stop reason {state.stop_reason}\n"
        )
        out.write(f"Temporal UI: {stack.thread_url(handle.id)}\n")
        if stack.started_server:
            out.write(
                "(the dev server stops with the demo; its history is kept in "
                f"{config.path('.weft/temporal.db')}: run `weft dev` to browse it at that "
                "address)\n"
            )
        out.flush()
    return 0


def _weft() -> str:
    """How the user runs `weft` from another terminal: by name if it is on PATH."""
    beside = Path(sys.executable).parent / "weft"
    return "weft" if shutil.which("weft") == str(beside) or not beside.exists() else str(beside)


def _how_to_answer(out: TextIO, thread_id: str, action_id: str, wait: float) -> None:
    weft = _weft()
    out.write(
        f"  The thread waits for you. From another terminal, in this folder:\n"
        f"      {weft} inbox\n"
        f"      {weft} thread respond {thread_id} {action_id} approve   (or deny)\n"
        f"    or in a browser: `{weft} serve` (it prints its token), then "
        f"http://127.0.0.1:{INBOX_PORT}/inbox\n"
        f"  With no answer in {wait:.0f} s the demo approves it.\n"
    )
    out.flush()


async def _approve_unless_answered(
    client: Client, threads: Threads, thread_id: str, action_id: str, wait: float, out: TextIO
) -> None:
    await asyncio.sleep(wait)
    state = await threads.read(thread_id)
    if not any(action.get("actionId") == action_id for action in state.pending_actions):
        return
    reason = f"no answer in {wait:.0f} s: the demo approved it"
    try:
        await respond_checked(client, thread_id, response(action_id, "approve", reason=reason))
    except WorkflowUpdateFailedError:
        return  # answered by a person meanwhile
    out.write(f"  ({reason})\n")
    out.flush()


async def _idle(
    threads: Threads, thread_id: str, *, queued_first: Callable[[], bool]
) -> ThreadRead:
    while True:
        state = await threads.read(thread_id)
        if (
            state.status == "waiting_input"
            and not state.queue
            and not state.pending_actions
            and queued_first()
            and state.counters.turns >= 1
        ):
            return state
        await asyncio.sleep(0.1)
