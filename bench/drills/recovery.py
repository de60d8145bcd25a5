"""Drill 6: recovery time. Threads sit inside a 3 s tool when their worker or the Temporal
server dies; the drill times how soon they move again once something healthy is there.

  worker kill          a `weft worker` SIGKILLed while a second worker already polls
  server kill          the dev server (persistent db file) SIGKILLed and started again
  server stop          the same with SIGTERM
  server kill, long    the server down longer than the threads' heartbeat timeout: Temporal
                       times out every in-flight activity when it is back, and the worker
                       answers the retries with the results it could not report. Only the
                       tools are judged here: after a long outage the SDK's pollers retry
                       up to 10 s apart, which no weft setting changes (docs/recovery.md)

Every timing comes from the store's event timestamps (wall clock, written by the
activities) against the wall-clock moments of the kill and of the recovery. A thread
"resumes" when its killed tool is started again and when, after its tool's result, its next
model call starts: the longest such wait per thread, from a healthy worker being there, is
checked against TARGET_SECONDS. The threads run with weft's default thread options and the
workers with the default recovery settings, so the figures are the product's.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from temporalio.client import Client
from worker_process import WorkerProcess

from drills.common import (
    FINAL_TEXT,
    Report,
    attempts_after_first,
    drill_stack,
    event_counts,
    first,
    note,
    report_history,
    slow_script,
    summary,
    task_queue,
    wait_for_events,
    write_worker_config,
)
from weft.client.threads import Threads
from weft.store import Store
from weft.transport.connection import connect
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import load_config
from weft.workers.dev_server import DevServer, free_port
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.search_attributes import ensure_search_attributes

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_THREADS = 10
TOOL_SECONDS = 3.0
TARGET_SECONDS = 5.0
OUTAGE_SECONDS = 1.0  # the server stays down this long: a real outage, not a reconnect
LONG_OUTAGE_SECONDS = 12.0  # longer than the 3 s heartbeat timeout and the first poll retries
ANSWER_TIMEOUT = 180.0


class CrashableServer(DevServer):
    """The dev server, which can also die without a clean shutdown."""

    def crash(self, how: signal.Signals) -> None:
        """Send `how` and wait for the process to exit (SIGKILL: no shutdown at all)."""
        process, self._process = self._process, None
        assert process is not None
        process.send_signal(how)
        process.wait(30)


def crashable_server(db_file: Path) -> CrashableServer:
    """A dev server tuned as in temporal-dev.yml, on free ports, keeping its state in a file."""
    tuned = load_config(ROOT / "temporal-dev.yml", environ={}).temporal.dev_server
    config = tuned.model_copy(update={"ui_port": free_port(), "db_file": str(db_file)})
    return CrashableServer(config, address=f"127.0.0.1:{free_port()}", persistent=True, ui=False)


@dataclass
class Timeline:
    """One thread's events that matter for recovery, as wall-clock seconds."""

    tool_starts: list[tuple[int, float]] = field(default_factory=list)  # (attempt, when)
    tool_done: float | None = None
    model_requests: list[float] = field(default_factory=list)
    answered: float | None = None

    def retry_wait(self, healthy: float) -> float | None:
        """Seconds from `healthy` until the killed tool started again (None: not retried)."""
        retries = [t for attempt, t in self.tool_starts if attempt > 1]
        return min(retries) - healthy if retries else None

    def continue_wait(self, healthy: float) -> float | None:
        """Seconds from the tool's result (or `healthy`, if later) to the next model call."""
        if self.tool_done is None:
            return None
        after = [t for t in self.model_requests if t >= self.tool_done]
        return min(after) - max(self.tool_done, healthy) if after else None


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def timeline(store: Store, thread_id: str) -> Timeline:
    """The thread's tool attempts, tool result, model calls and answer from the store."""
    line = Timeline()
    kinds = ["tool.started", "tool.result", "model.requested", "turn.completed"]
    for event in store.events.read(thread_id, types=kinds, limit=10_000):
        when = _seconds(event.timestamp)
        if event.type == "tool.started":
            line.tool_starts.append((int(event.payload.get("attempt", 1)), when))
        elif event.type == "tool.result":
            line.tool_done = when
        elif event.type == "model.requested":
            line.model_requests.append(when)
        elif line.answered is None:
            line.answered = when
    return line


def _script() -> dict[str, object]:
    # One tool call of TOOL_SECONDS, then the answer; the model streams fast.
    return slow_script(2, tool_seconds=TOOL_SECONDS, chunk_delay_ms=5)


async def run(report: Report, args: argparse.Namespace) -> None:
    """The worker kill, then the server kill and the clean server stop."""
    threads = args.threads or DEFAULT_THREADS
    await _worker_kill(report, threads)
    await _server_crash(report, threads, signal.SIGKILL, "server kill")
    await _server_crash(report, threads, signal.SIGTERM, "server stop")
    await _server_crash(
        report,
        threads,
        signal.SIGKILL,
        f"server kill, {LONG_OUTAGE_SECONDS:.0f} s down",
        outage=LONG_OUTAGE_SECONDS,
        timed=False,
    )


async def _start_threads(client: Client, queue: str, threads: int, label: str) -> list[str]:
    """Threads started as a client would, with the default thread options."""
    starter = Threads(client, task_queue=queue)
    handles = await asyncio.gather(
        *(starter.start("drill_agent", messages=[f"{label} thread {i}"]) for i in range(threads))
    )
    return [h.id for h in handles]


async def _worker_kill(report: Report, threads: int) -> None:
    """All threads inside a tool on worker A; worker B polls; A is SIGKILLed."""
    async with drill_stack("recovery", _script()) as stack:
        client, store = stack.client, stack.store
        doomed = WorkerProcess(stack.config_file)
        try:
            await doomed.start()
            ids = await _start_threads(client, stack.queue, threads, "worker kill")
            note(f"worker kill: {threads} threads, each in a {TOOL_SECONDS:.0f} s tool")
            await wait_for_events(store, ids, "tool.started", timeout=120, interval=0.05)
            # The successor runs in this process: it polls within a second, so every
            # tool is still running on the doomed worker when it dies.
            async with AgentWorker(client, load_config(stack.config_file)) as successor:
                del successor
                polling = time.time()
                hit = threads - len(await asyncio.to_thread(event_counts, store, "tool.result"))
                killed = time.time()
                await doomed.kill()
                note(f"worker kill: SIGKILL with {hit}/{threads} tools in flight")
                await _judge(report, client, store, ids, "worker kill", killed, polling)
        finally:
            await doomed.stop()


async def _server_crash(
    report: Report,
    threads: int,
    how: signal.Signals,
    label: str,
    *,
    outage: float = OUTAGE_SECONDS,
    timed: bool = True,
) -> None:
    """All threads inside a tool on one worker; the server dies (`how`) and starts again."""
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        server = crashable_server(tmp / "temporal.db")
        url = f"sqlite:///{tmp / 'weft.db'}"
        async with ScriptedModelServer({"drill": _script()}) as scripted:
            await server.start()
            store = await asyncio.to_thread(Store.open, url)
            config_file = write_worker_config(
                tmp,
                address=server.address,
                task_queue=task_queue("recovery"),
                store_url=url,
                model_url=scripted.openai_base_url,
            )
            queue = load_config(config_file).temporal.task_queue
            worker = WorkerProcess(config_file)
            try:
                client = await connect(server.address)
                await ensure_search_attributes(client, "default")
                await worker.start()
                ids = await _start_threads(client, queue, threads, label)
                note(f"{label}: {threads} threads, each in a {TOOL_SECONDS:.0f} s tool")
                await wait_for_events(store, ids, "tool.started", timeout=120, interval=0.05)
                killed = time.time()
                await asyncio.to_thread(server.crash, how)
                await asyncio.sleep(outage)
                await server.start()
                back = time.time()
                note(f"{label}: {how.name}, down {back - killed:.1f} s until serving again")
                client = await connect(server.address)
                await _judge(report, client, store, ids, label, killed, back, timed=timed)
            finally:
                await worker.stop()
                await server.stop()
                store.close()


async def _judge(
    report: Report,
    client: Client,
    store: Store,
    ids: list[str],
    label: str,
    killed: float,
    available: float,
    *,
    timed: bool = True,
) -> None:
    """Wait for every answer, then print the recovery figures and check the invariants
    (the resume time against the target only when `timed`)."""
    healthy = max(killed, available)  # when the threads could first move again
    try:
        await wait_for_events(store, ids, "turn.completed", timeout=ANSWER_TIMEOUT, interval=0.1)
    except TimeoutError as error:
        report.check(f"{label}: every thread answers", False, str(error))
        return
    lines = await asyncio.to_thread(lambda: [timeline(store, t) for t in ids])
    last_answer = max(line.answered or 0.0 for line in lines)
    report.figure(
        f"{label}: all answers",
        f"{last_answer - killed:.1f} s after the kill, {last_answer - available:.1f} s after "
        f"a healthy {'worker' if 'worker' in label else 'server'} was there",
    )
    retry = _present(line.retry_wait(healthy) for line in lines)
    resume = _present(line.continue_wait(healthy) for line in lines)
    report.figure(f"{label}: killed tool started again after", summary(retry, "s", 1))
    report.figure(f"{label}: next model call after the tool's result", summary(resume, "s", 1))
    worst = max([*retry, *resume], default=float("inf"))
    if timed:
        report.check(
            f"{label}: every thread resumes within {TARGET_SECONDS:.0f} s",
            worst <= TARGET_SECONDS,
            f"longest wait {worst:.1f} s",
        )
    await _check_once(report, client, store, ids, label)


def _present(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]


async def _check_once(
    report: Report, client: Client, store: Store, ids: list[str], label: str
) -> None:
    """No tool that had finished ran again, and every thread answered the final text."""
    runs = await asyncio.to_thread(lambda: {t: store.values.get(t, "runs") for t in ids})
    twice = [f"{t}: {n}" for t, n in runs.items() if n != 1]
    report.check(f"{label}: every tool ran to its end exactly once", not twice, first(twice))
    wrong = await asyncio.to_thread(lambda: [t for t in ids if not _answered_final(store, t)])
    report.check(f"{label}: every thread answers the final text", not wrong, first(wrong))
    retried = await report_history(report, client, ids)
    rerun = await asyncio.to_thread(attempts_after_first, store, ids, "tool.started")
    report.figure(
        f"{label}: retries that ran the tool again",
        f"{rerun} of {retried} (a retry of an attempt that finished on the same worker gets "
        "that attempt's result)",
    )


def _answered_final(store: Store, thread_id: str) -> bool:
    messages = store.messages.list(thread_id)
    return bool(messages) and messages[-1].content == FINAL_TEXT
