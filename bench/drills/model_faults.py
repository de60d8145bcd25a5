"""Drill 4: the model server drops the connection, truncates the stream and answers 500
before 200, once each in every thread; all threads recover, and every failure and retry is
recorded as a fact (model.failed, model.requested with reset, the attempt in history)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from support import agent_definitions, local_stack, read, scratch_config, start_thread
from temporalio.client import Client

from drills.common import (
    FINAL_TEXT,
    Report,
    attempts_after_first,
    check_all_complete,
    first,
    history_facts,
    note,
    render_counts,
    sequence_problems,
    transcript_problems,
)
from weft.store import Store
from weft.workers.agent_worker import AgentWorker

DEFAULT_THREADS = 50
ROLES = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
# One fault per model call of a thread; `times: 1` makes the retry succeed. The server counts
# faults per conversation, so every thread meets each fault once.
SCRIPT = {
    "replies": [
        {
            "tool_calls": [{"name": "note", "arguments": {"text": "after a dropped connection"}}],
            "chunk_size": 5,
            "drop_after_chunks": 2,
            "times": 1,
        },
        {
            "tool_calls": [{"name": "note", "arguments": {"text": "after a truncated stream"}}],
            "truncate": True,
            "times": 1,
        },
        {"text": FINAL_TEXT, "error": {"status": 500, "body": "scripted outage"}, "times": 1},
    ]
}
FAULTS_PER_THREAD = 3


async def run(report: Report, args: argparse.Namespace) -> None:
    """Run the threads on one in-process worker against the faulty script."""
    threads = args.threads or DEFAULT_THREADS
    # Every injected fault is expected; the drill counts them from the store instead of
    # printing the SDK's traceback for each failed attempt.
    quiet = logging.getLogger("temporalio.activity")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        await _run(report, threads)
    finally:
        quiet.setLevel(level)


async def _run(report: Report, threads: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with local_stack() as (client, scripted, _address):
            scripted.set_script("faulty", SCRIPT)
            async with AgentWorker(
                client,
                scratch_config(Path(tmp)),
                definitions=agent_definitions("faulty"),
                task_queue=f"drill-faults-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
            ) as worker:
                assert worker.store is not None
                await _drill(report, client, worker.store, worker.task_queue, threads)


async def _drill(report: Report, client: Client, store: Store, queue: str, threads: int) -> None:
    note(f"{threads} threads, each meeting {FAULTS_PER_THREAD} model faults")
    began = time.perf_counter()
    handles = await asyncio.gather(
        *(
            start_thread(
                client, queue, messages=[{"role": "user", "content": f"fault drill thread {i}"}]
            )
            for i in range(threads)
        )
    )
    ids = [h.id for h in handles]
    await check_all_complete(report, store, ids, timeout=600)
    report.figure("completion time", f"{time.perf_counter() - began:.1f} s")

    states = await asyncio.gather(*(read(h) for h in handles))
    wrong = [
        f"{h.id}: {s.status} {s.last_outcome!r}"
        for h, s in zip(handles, states, strict=True)
        if s.status != "waiting_input" or s.last_outcome != FINAL_TEXT
    ]
    report.check("every thread answers the final text", not wrong, first(wrong))

    failed = await asyncio.to_thread(
        lambda: {t: store.events.read(t, types=["model.failed"]) for t in ids}
    )
    kinds = Counter(str(e.payload.get("errorType")) for events in failed.values() for e in events)
    total = sum(kinds.values())
    report.figure(
        "model.failed facts",
        f"{total}: " + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())),
    )
    uneven = [
        f"{t}: {[e.payload.get('errorType') for e in events]}"
        for t, events in failed.items()
        if len(events) != FAULTS_PER_THREAD or not all(e.payload["retryable"] for e in events)
    ]
    report.check(
        f"each thread records {FAULTS_PER_THREAD} retryable model.failed", not uneven, first(uneven)
    )
    resets = await asyncio.to_thread(attempts_after_first, store, ids, "model.requested")
    retried, timeouts = await history_facts(client, ids)
    report.figure(
        "retry facts",
        f"model.requested with reset {resets}; model.call retried in history "
        f"{retried['model.call']}; other activities retried {sum(retried.values()) - retried['model.call']}",
    )
    report.figure("workflow tasks timed out (history)", render_counts(timeouts))
    expected = threads * FAULTS_PER_THREAD
    report.check(
        "every fault was retried once, in the store and in history",
        resets == expected == retried["model.call"],
        f"expected {expected}",
    )
    warnings = await asyncio.to_thread(
        lambda: sum(len(store.events.read(t, types=["runtime.warning"])) for t in ids)
    )
    report.figure("runtime.warning (a model call that ran out of attempts)", str(warnings))

    def transcripts() -> list[str]:
        problems = [p for t in ids for p in transcript_problems(store, t, ROLES, {5: FINAL_TEXT})]
        problems += [p for t in ids for p in sequence_problems(store, t)]
        notes = ["after a dropped connection", "after a truncated stream"]
        problems += [f"{t}: notes" for t in ids if store.values.get(t, "notes") != notes]
        return problems

    problems = await asyncio.to_thread(transcripts)
    report.check(
        "no message lost or duplicated; each tool ran once; sequences gapless",
        not problems,
        first(problems),
    )
