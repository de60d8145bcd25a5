"""Recovery: how soon a killed worker's threads answer again once a healthy worker polls.

Run: `.venv/bin/python bench/bench_recovery.py [--threads 20] [--rounds 4]
[--sticky-schedule-to-start S]`.

Threads in mid-conversation (a turn answered, waiting for the next message) are cached on
worker A (`weft worker`'s AgentWorker in a subprocess) on a tuned dev server, a scratch
SQLite store and the scripted model. Every thread is queried just before the kill, so A has
polled its sticky queue moments before it dies, as a worker with live threads always has.
A is SIGKILLed and every thread gets a new message. Each round does this twice:

  started after   worker B starts polling after the kill; half the threads get their
                  message at the kill (while no worker polls), half once B polls;
  already polling B polls before the kill; every thread gets its message at the kill.

B is started ahead and held before it builds the worker, then released: a restart without
the interpreter's start-up, which takes 10-30 s on a loaded 2-core machine and is no part
of weft's recovery. A thread's latency is from the moment a healthy worker polls (B's
"polling" line, or the kill when B already polled) to its answer's `turn.completed` in the
store (the event's wall-clock timestamp). Target: every thread within 2 s. The worker left
after a round is the next round's A. Where the wait went is read from Temporal history: a
workflow task that timed out `SCHEDULE_TO_START` waited on the dead worker's sticky queue
for the workers' `stickyScheduleToStartSeconds` (docs/recovery.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import yaml  # noqa: E402
from drills.common import (  # noqa: E402
    drill_stack,
    history_facts,
    note,
    render_counts,
    wait_for_events,
)
from support import read  # noqa: E402
from temporalio.api.enums.v1 import EventType, TaskQueueKind  # noqa: E402
from temporalio.client import Client  # noqa: E402

from weft.client.threads import Threads  # noqa: E402
from weft.store import Store  # noqa: E402

AGENT = "drill_agent"  # bench/drills/definitions: the `drill` script on the scripted model
SCRIPT = {"replies": [{"text": "ok"}]}
TARGET_SECONDS = 2.0


def answered_at(store: Store, thread_id: str, turn: int) -> float:
    """Wall-clock seconds of the thread's `turn`-th turn.completed (1-based)."""
    events = store.events.read(thread_id, types=["turn.completed"], limit=10_000)
    stamp = events[turn - 1].timestamp.replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


async def phases(client: Client, thread_id: str, healthy: float) -> dict[str, float]:
    """Where a thread's wait went, from its history after the newest signal (seconds):
    until its first workflow task started (from the later of the signal and `healthy`),
    that task (a replay, on a worker without the thread cached), the model call; and
    whether that task was first put on a sticky queue (1) and timed out there (1)."""
    history = await client.get_workflow_handle(thread_id).fetch_history()
    events = list(history.events)
    signal = max(
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    found: dict[str, float] = {}
    at = events[signal].event_time.ToDatetime().timestamp()
    for event in events[signal:]:
        when = event.event_time.ToDatetime().timestamp()
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED and "sticky" not in found:
            queue_kind = event.workflow_task_scheduled_event_attributes.task_queue.kind
            found["sticky"] = float(queue_kind == TaskQueueKind.TASK_QUEUE_KIND_STICKY)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            found["timed out"] = 1.0
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED and "task start" not in found:
            found["task start"] = when - max(at, healthy)
            started = when
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED and "replay" not in found:
            found["replay"] = when - started
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED and "model" not in found:
            scheduled = when
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and "model" not in found:
            found["model"] = when - scheduled
    return found


class Round:
    """One kill and its threads' latencies, from the moment a healthy worker polled."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.latencies: dict[str, list[float]] = {}
        self.startup = 0.0  # kill until B polled (0 when B already polled)
        self.phases: list[dict[str, float]] = []

    def all(self) -> list[float]:
        return [v for values in self.latencies.values() for v in values]


async def send_all(threads: Threads, ids: list[str], text: str) -> None:
    await asyncio.gather(*(threads.send(t, text) for t in ids))


async def touch_all(client: Client, ids: list[str]) -> None:
    """Query every thread: a query is a workflow task on the sticky queue of the worker
    that caches the thread, so that worker polls its sticky queue again just before it
    dies, as a worker with live threads always has. The server then still counts it as
    there, and a message's task waits on its queue for the sticky timeout."""
    await asyncio.gather(*(read(client.get_workflow_handle(t)) for t in ids))


class HeldWorker:
    """A worker subprocess (this file with `--serve`: `weft worker`'s AgentWorker) that
    imports, loads its config and connects, then waits to be released before it builds
    the worker and polls: a restart without the interpreter's start-up, which on a loaded
    2-core machine takes 10-30 s and is no part of weft's recovery."""

    def __init__(self, config: Path) -> None:
        self._config = config
        self.process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the process and wait until it is ready to build the worker."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--serve",
            str(self._config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        await self._until(b"ready")

    async def release(self) -> float:
        """Let it build the worker and poll; the wall-clock time it polls."""
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()
        await self._until(b"polling")
        polled = time.time()
        self._drain = asyncio.create_task(self._discard())
        return polled

    async def _until(self, word: bytes) -> None:
        assert self.process is not None and self.process.stdout is not None
        seen = []
        while word not in (line := await asyncio.wait_for(self.process.stdout.readline(), 120)):
            seen.append(line.decode(errors="replace"))
            if not line:
                raise RuntimeError(f"the worker exited before {word!r}: {''.join(seen[-20:])}")

    async def _discard(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while await self.process.stdout.read(65536):
            pass

    async def kill(self) -> None:
        """SIGKILL: no shutdown, nothing reported."""
        assert self.process is not None
        self.process.kill()
        await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM (SIGKILL after 30 s) and wait."""
        if self.process is None or self.process.returncode is not None:
            return
        self.process.terminate()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


async def one_round(
    mode: str,
    client: Client,
    current: HeldWorker,
    config: Path,
    threads: Threads,
    store: Store,
    ids: list[str],
    turns_done: int,
) -> tuple[Round, HeldWorker]:
    """Kill `current`, get every thread a message, wait for every answer; returns the
    round's figures and the worker that is left."""
    successor = HeldWorker(config)
    try:
        return await kill_and_answer(
            mode, client, current, successor, threads, store, ids, turns_done
        )
    except BaseException:
        await successor.stop()  # the caller stops `current`
        raise


async def kill_and_answer(
    mode: str,
    client: Client,
    current: HeldWorker,
    successor: HeldWorker,
    threads: Threads,
    store: Store,
    ids: list[str],
    turns_done: int,
) -> tuple[Round, HeldWorker]:
    """One round's kill, messages and answers (one_round's body)."""
    result = Round(mode)
    await successor.start()
    early, late = ids[: len(ids) // 2], ids[len(ids) // 2 :]
    if mode == "already polling":
        await successor.release()
        await touch_all(client, ids)
        killed = time.time()
        await current.kill()
        await send_all(threads, ids, "still there?")
        healthy = killed
        groups = {"message at the kill": ids}
    else:
        await touch_all(client, ids)
        killed = time.time()
        await current.kill()
        await send_all(threads, early, "still there?")
        healthy = await successor.release()
        result.startup = healthy - killed
        await send_all(threads, late, "still there?")
        groups = {"message at the kill": early, "message once B polls": late}
    await wait_for_events(
        store, ids, "turn.completed", count=turns_done + 1, timeout=120, interval=0.05
    )
    for label, members in groups.items():
        stamps = await asyncio.to_thread(answers_at, store, members, turns_done + 1)
        result.latencies[label] = [stamp - healthy for stamp in stamps]
    result.phases = list(await asyncio.gather(*(phases(client, t, healthy) for t in ids)))
    return result, successor


def answers_at(store: Store, ids: list[str], turn: int) -> list[float]:
    return [answered_at(store, t, turn) for t in ids]


def show_phases(rounds: list[Round]) -> str:
    """Medians of where the waits went, and how many first tasks went to a sticky queue."""
    found = [p for r in rounds for p in r.phases]
    parts = [
        f"{label} {statistics.median(p.get(key, 0.0) for p in found):.2f} s"
        for key, label in (
            ("task start", "until the first workflow task started"),
            ("replay", "that task (a replay)"),
            ("model", "model.call"),
        )
    ]
    sticky = sum(int(p.get("sticky", 0)) for p in found)
    timed_out = sum(int(p.get("timed out", 0)) for p in found)
    return (
        f"{'; '.join(parts)}; first task on the dead worker's sticky queue {sticky}/{len(found)}"
        f", timed out there {timed_out}"
    )


def show(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values):.2f} s, max {max(values):.2f} s "
        f"({sum(v <= TARGET_SECONDS for v in values)}/{len(values)} within {TARGET_SECONDS:.0f} s)"
    )


async def main(args: argparse.Namespace) -> int:
    async with drill_stack("recovery-latency", SCRIPT) as stack:
        with_sticky_timeout(stack.config_file, args.sticky_schedule_to_start)
        return await run(args, stack.client, stack.config_file, stack.queue, stack.store)


def with_sticky_timeout(config_file: Path, sticky: float | None) -> None:
    """The worker config with `--sticky-schedule-to-start`, when given."""
    if sticky is None:
        return
    config: dict[str, Any] = yaml.safe_load(config_file.read_text())
    config["worker"] = {"stickyScheduleToStartSeconds": sticky}
    config_file.write_text(yaml.safe_dump(config))


async def run(
    args: argparse.Namespace, client: Client, config: Path, queue: str, store: Store
) -> int:
    threads = Threads(client, task_queue=queue)
    current = HeldWorker(config)
    await current.start()
    await current.release()
    rounds: list[Round] = []
    try:
        handles = await asyncio.gather(*(threads.start(AGENT) for _ in range(args.threads)))
        ids = [h.id for h in handles]
        await asyncio.gather(*(threads.ask(t, "hello", timeout=120) for t in ids))
        turns = 1
        note(f"{len(ids)} threads answered a first turn on worker A")
        for number in range(args.rounds):
            for mode in ("started after", "already polling"):
                outcome, current = await one_round(
                    mode, client, current, config, threads, store, ids, turns
                )
                turns += 1
                rounds.append(outcome)
                startup = (
                    f", B polled {outcome.startup:.1f} s after the kill" if outcome.startup else ""
                )
                parts = "; ".join(f"{k}: {show(v)}" for k, v in outcome.latencies.items())
                print(f"round {number + 1}, B {mode}{startup}: {parts}", flush=True)
    finally:
        await current.stop()
    retried, timeouts = await history_facts(client, ids)
    print(f"workflow tasks timed out (history): {render_counts(timeouts)}")
    print(f"activities retried (history): {render_counts(retried)}")
    everything = [v for r in rounds for v in r.all()]
    for mode in ("started after", "already polling"):
        values = [v for r in rounds if r.mode == mode for v in r.all()]
        print(f"B {mode}, {len(values)} answers: {show(values)}")
        print(f"  medians: {show_phases([r for r in rounds if r.mode == mode])}")
    verdict = "met" if max(everything) <= TARGET_SECONDS else "NOT met"
    print(
        f"all {len(everything)} answers: {show(everything)}; target {TARGET_SECONDS:.0f} s {verdict}"
    )
    return 0


async def serve(config_file: Path) -> None:
    """The worker subprocess: ready once connected; polls after a line on stdin; stops on
    SIGTERM."""
    import signal

    from weft.cli.temporal_client import client_from_config
    from weft.workers.agent_worker import AgentWorker, load_definitions
    from weft.workers.config import load_config

    config = load_config(config_file)
    definitions = load_definitions(config)
    client = await client_from_config(config)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print("recovery worker: ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    async with AgentWorker(client, config, definitions=definitions) as worker:
        print(f"recovery worker: polling {worker.task_queue}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument(
        "--sticky-schedule-to-start",
        type=float,
        help="the workers' stickyScheduleToStartSeconds (default: weft's)",
    )
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # a worker subprocess
    parsed = parser.parse_args()
    if parsed.serve is not None:
        asyncio.run(serve(parsed.serve))
    else:
        raise SystemExit(asyncio.run(main(parsed)))
