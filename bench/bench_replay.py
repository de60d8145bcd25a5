"""One replay's CPU: what waking a thread the workflow cache dropped costs its worker.

Run: `.venv/bin/python bench/bench_replay.py [--history truthful_log] [--runs 200]
[--profile FILE]`.

Replays one committed history (tests/histories/NAME.json; by default a thread of three
user messages, 55 events) `--runs` times with weft's workflow runner, the way a worker
replays an evicted thread on its next task: a new sandboxed instance, the history's
activations, their payloads decoded and the commands encoded. Replays run in batches of
10 on one `Replayer` worker each, with the activations on one executor thread. No server.

Printed, in ms of CPU per replay (CPU clocks, not wall time: a shared machine's load
moves them far less; medians over the batches):
- the process, split into the activation thread (weft's workflow code, the SDK's workflow
  instance and the sandbox), the event loop thread (the SDK's worker: decoding each
  activation's payloads, encoding each completion's, building the instance) and the rest
  (the Temporal core's native threads replaying the history);
- creating the instance, and on the activation thread each kind of activation (by its
  jobs): how many per replay and their CPU.
`--profile FILE` writes a cProfile of the activation thread to FILE and of the event loop
thread to FILE.main (`python -m pstats FILE`); the profiler inflates Python-heavy parts.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import (
    Replayer,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)

from weft.workers.workflow_runner import ForwardingInstance, workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow

HISTORIES = Path(__file__).resolve().parents[1] / "tests" / "histories"
BATCH = 10


@dataclass
class ActivationClock:
    """CPU seconds of the activation thread, by what it did, and how often."""

    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    count: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, kind: str, seconds: float) -> None:
        self.seconds[kind] += seconds
        self.count[kind] += 1


@dataclass(frozen=True)
class TimedRunner(WorkflowRunner):
    """`runner`, its instances' activations timed on their thread's CPU clock."""

    runner: WorkflowRunner
    clock: ActivationClock

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        began = time.thread_time()
        instance = self.runner.create_instance(det)
        self.clock.add(
            "(creating the instance: on the event loop thread)", time.thread_time() - began
        )
        return _TimedInstance(instance, self.clock)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.runner.set_worker_level_failure_exception_types(types)


class _TimedInstance(ForwardingInstance):
    def __init__(self, instance: WorkflowInstance, clock: ActivationClock) -> None:
        super().__init__(instance)
        self._clock = clock

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        began = time.thread_time()
        completion = self._instance.activate(act)
        kind = "+".join(sorted({str(job.WhichOneof("variant")) for job in act.jobs}))
        self._clock.add(kind, time.thread_time() - began)
        return completion


async def repeated(history: WorkflowHistory, times: int) -> AsyncIterator[WorkflowHistory]:
    for _ in range(times):
        yield history


@dataclass
class Measured:
    per_replay: list[float]  # process CPU seconds per replay, one figure a batch
    activation_thread: float  # CPU seconds per replay, over all batches
    event_loop: float
    clock: ActivationClock


async def replay_batches(
    history: WorkflowHistory, runs: int, executor: ThreadPoolExecutor
) -> Measured:
    """Replay `history` `runs` times, in batches of `BATCH` on one `Replayer` worker each."""
    clock = ActivationClock()
    replayer = Replayer(
        workflow_task_executor=executor,
        workflows=[AgentThreadWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=TimedRunner(workflow_runner(pydantic_data_converter), clock),
    )
    per_replay = []
    batches = max(1, runs // BATCH)
    thread_began = executor.submit(time.thread_time).result()
    loop_began = time.thread_time()
    for _ in range(batches):
        began = time.process_time()
        results = await replayer.replay_workflows(repeated(history, BATCH))
        per_replay.append((time.process_time() - began) / BATCH)
        assert not results.replay_failures, results.replay_failures
    replays = batches * BATCH
    return Measured(
        per_replay,
        (executor.submit(time.thread_time).result() - thread_began) / replays,
        (time.thread_time() - loop_began) / replays,
        clock,
    )


def measure(history: WorkflowHistory, runs: int, profile: str | None) -> Measured:
    """`replay_batches` after a warm-up batch, with `profile`'s profilers if asked: the
    activations run on the executor's thread, which a profiler of the main thread misses."""
    thread_profiler = cProfile.Profile()
    start_thread: Callable[[], None] = thread_profiler.enable if profile else lambda: None
    executor = ThreadPoolExecutor(max_workers=1, initializer=start_thread)
    if profile:
        executor.submit(thread_profiler.disable).result()
    asyncio.run(replay_batches(history, BATCH, executor))  # the first imports, set-up
    loop_profiler = cProfile.Profile()
    if profile:
        executor.submit(thread_profiler.enable).result()
        loop_profiler.enable()
    measured = asyncio.run(replay_batches(history, runs, executor))
    if profile:
        loop_profiler.disable()
        executor.submit(thread_profiler.disable).result()
        thread_profiler.dump_stats(profile)
        loop_profiler.dump_stats(f"{profile}.main")
    executor.shutdown()
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", default="truthful_log", help="tests/histories/NAME.json")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--profile", help="write cProfiles of the timed runs to FILE(.main)")
    args = parser.parse_args()
    path = HISTORIES / f"{args.history}.json"
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    m = measure(history, args.runs, args.profile)
    process = statistics.median(m.per_replay)
    replays = len(m.per_replay) * BATCH
    ms = 1000
    print(
        f"{args.history} ({len(history.events)} events), {replays} replays: CPU per replay "
        f"{process * ms:.1f} ms (median of batches; min {min(m.per_replay) * ms:.1f}): "
        f"activation thread {m.activation_thread * ms:.1f}, event loop {m.event_loop * ms:.1f}, "
        f"the rest (native) {(process - m.activation_thread - m.event_loop) * ms:.1f}"
    )
    print("creating the instance, and each kind of activation (its jobs), per replay:")
    for kind, seconds in sorted(m.clock.seconds.items(), key=lambda item: -item[1]):
        count = m.clock.count[kind] / replays
        print(f"  {seconds / replays * ms:6.2f} ms  {count:5.1f}x  {kind}")


if __name__ == "__main__":
    main()
