"""Case threads in flight, marked in the results folder: a run killed mid-case leaves its
threads open with no worker to end them, and the re-run ends them before it starts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
from pathlib import Path

from temporalio.service import RPCError

from weft.client.threads import Threads
from weft.store import Store

SUFFIX = ".inflight"
REASON = "the eval run that started it ended without closing it"


def mark(results: Path, name: str, thread_id: str) -> Path:
    """Note that `thread_id` runs case `name` for this process; the path to unmark."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.{thread_id}{SUFFIX}"
    owner = {"threadId": thread_id, "pid": os.getpid(), "host": socket.gethostname()}
    partial = path.with_name(f"{path.name}.tmp")
    partial.write_text(json.dumps(owner), encoding="utf-8")
    os.replace(partial, path)  # whole or absent, whenever the run is killed
    return path


def _abandoned(path: Path) -> str | None:
    """The thread a marker names, when the process that wrote it is gone."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        thread_id, pid, host = str(owner["threadId"]), int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host != socket.gethostname():
        return None  # another machine's run: whether it still runs cannot be told here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return thread_id
    except PermissionError:
        return None  # alive, someone else's
    return None if pid != os.getpid() else thread_id


async def end_abandoned(threads: Threads, store: Store, results: Path) -> list[str]:
    """Terminate (in Temporal: their worker is gone) the threads a killed run left open,
    with their subagents; the ids ended."""
    ended: list[str] = []
    for path in sorted(results.glob(f"*{SUFFIX}")) if results.is_dir() else []:
        thread_id = _abandoned(path)
        if thread_id is None:
            continue
        pending = [thread_id]
        while pending:
            current = pending.pop()
            children = await asyncio.to_thread(store.subagents.list, current)
            pending += [str(entry["reference"]) for entry in children]
            with contextlib.suppress(RPCError):  # never started, or closed already
                await threads.handle(current).terminate(REASON)
            ended.append(current)
        path.unlink(missing_ok=True)
    return ended
