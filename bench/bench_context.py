"""Request size and per-turn cost of one long thread on an 8k-token model, with compaction.

Run: `.venv/bin/python bench/bench_context.py [--turns N]` (default 1,000). One thread, N
turns of about 100 tokens each against the scripted model server, whose script enforces
the 8,192-token window with the provider's real HTTP 400. Prints, at turns 10, 100 and N:
the model request's size (JSON bytes of messages and tools, and estimated tokens) and the
mean wall time per turn over the ten turns before it; then the number of compactions, the
time they took against the whole run, and the request size range after the first
compaction (the target: bounded, not growing with the thread). The scripted model answers
at once, so the compaction share measures weft's own cost of compacting (planning, store
writes, the extra activity), not a real model's summarising time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from weft.contract.thread import ThreadRead

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import (  # noqa: E402
    local_stack,
    scratch_config,
    start_thread,
    store_of,
    wait_until,
)
from test_context_compaction import FILLER, WINDOW, chat_script, definitions  # noqa: E402

from weft.activities.compaction import REQUEST_MARKER  # noqa: E402
from weft.workers.agent_worker import AgentWorker  # noqa: E402


def _is_chat(record: dict[str, Any]) -> bool:
    users = [m for m in record["messages"] or [] if m.get("role") == "user"]
    return not users or REQUEST_MARKER not in str(users[-1].get("content"))


def _bytes(record: dict[str, Any]) -> int:
    return len(json.dumps([record["messages"], record["tools"]]).encode())


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


async def main(turns: int) -> None:
    async with local_stack() as (client, scripted, _address):
        with tempfile.TemporaryDirectory() as tmp_dir:
            config = scratch_config(Path(tmp_dir))
            script = f"bench-ctx-{uuid.uuid4().hex[:8]}"
            scripted.set_script(script, chat_script())
            async with AgentWorker(
                client,
                config,
                definitions=definitions(script),
                task_queue=f"ctx-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
            ) as worker:
                started = await start_thread(client, worker.task_queue)
                handle = client.get_workflow_handle(started.id)
                durations: list[float] = []
                began = time.perf_counter()
                for turn in range(turns):
                    sent = time.perf_counter()
                    await handle.signal(
                        "queue_message", {"role": "user", "content": f"turn {turn}: {FILLER}"}
                    )

                    def answered(s: ThreadRead, n: int = turn) -> bool:
                        return s.counters.turns > n and s.status == "waiting_input"

                    await wait_until(handle, answered, timeout=120, interval=0.005)
                    durations.append(time.perf_counter() - sent)
                total = time.perf_counter() - began
                events = store_of(worker).events.read(
                    started.id,
                    limit=100_000,
                    types=["context.compaction.started", "context.compaction.completed"],
                )
                boundaries = store_of(worker).boundaries.list(started.id)
                await handle.signal("terminate", {})
    chats = [r for r in scripted.requests if r["model"] == script and _is_chat(r)]
    refused = [r for r in scripted.requests if r["model"] == script and r["status"] != 200]
    print(f"{turns} turns in {total:.1f} s on a {WINDOW}-token window; HTTP errors: {len(refused)}")
    print("turn   request bytes   est. tokens   ms/turn (mean of the 10 turns before)")
    for mark in (10, 100, turns):
        if mark <= len(chats):
            record = chats[mark - 1]
            window = durations[max(0, mark - 10) : mark]
            mean_ms = 1000 * sum(window) / len(window)
            print(f"{mark:>5} {_bytes(record):>15} {record['request_tokens']:>13} {mean_ms:>10.1f}")
    starts = {e.payload["boundaryId"]: e.timestamp for e in events if e.type.endswith("started")}
    spent = sum(
        _seconds(starts[e.payload["boundaryId"]], e.timestamp)
        for e in events
        if e.type.endswith("completed") and e.payload["boundaryId"] in starts
    )
    print(f"compactions: {len(boundaries)}; time in compaction: {spent:.2f} s")
    print(f"compaction share of the run: {100 * spent / total:.1f} % (target < 10 %)")
    if boundaries:
        first = next(
            i
            for i in range(1, len(chats))
            if chats[i]["request_tokens"] < chats[i - 1]["request_tokens"]
        )
        after = [r["request_tokens"] for r in chats[first:]]
        print(f"request tokens after the first compaction: min {min(after)}, max {max(after)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1_000)
    asyncio.run(main(parser.parse_args().turns))
