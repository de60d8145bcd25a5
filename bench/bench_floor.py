"""weft against the hand-written Temporal floor, in one run on one dev server.

Run: `.venv/bin/python bench/bench_floor.py [--steps 20,80,400] [--runs 5]
[--eager gated|off|always]`.

The scenario (bench/scenario.py): the model calls the `add` tool K times, then answers, so
a run has K + 1 steps (a step: one model call, and its tool call if any). Three sides play
the same script on the same scripted OpenAI-compatible server, one run after the other,
on the same tuned dev server (tests/support.py local_stack):
- the plain loop (bench/floor.py `plain_loop`): the floor's model and tool calls made in
  process, no Temporal: what the model and the tool cost by themselves;
- the floor (bench/floor.py): one activity per model call and per tool call, the whole
  transcript held by the workflow and passed to the model activity, no store;
- weft: an AgentThread on an in-process AgentWorker with a SQLite store.

A side's overhead per step is its ms/step less the loop's: the
model's time grows with the transcript it is sent (for every side alike), so the targets
(weft's overhead at most 1.15x the floor's, growing under 10 % from the first K to the
last) are on overhead, and the ratio is the median of each run's own ratio (the sides of a
run go back to back, so the machine's drift between runs cancels). The runs go in rounds,
each round one run of every K, and growth is the median of each round's own growth: the
runs it compares are minutes apart at most, where K after K would put every K=400 run
after every K=20 run, and a slowing machine would read as growth. The ratio of the median
overheads, the growth of the medians and of whole ms/step are printed too.

Every figure comes from what was measured in this run:
- ms/step: the loop's from a wall clock around it; the floor's and weft's from server
  timestamps, the floor from its start to its completion, weft from the user message's
  signal to the workflow task that ends the turn;
- history bytes per step: the proto size of every event of every run, over the steps;
- per-phase time per step from history (workflow tasks and each activity type: queued =
  scheduled -> started, running = started -> completed);
- inside weft's worker (bench/worker_probe.py): each activity's own time, SQL statements
  and commits (count, time), provider I/O, and the rest (context assembly, serialization,
  everything else), by activity type.
Medians over `--runs`; the breakdowns are those of each side's median run. The run also
prints how busy the machine was with other processes: on a shared machine, a large share
means the figures are unreliable.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from floor import WORKFLOW as FLOOR_WORKFLOW  # noqa: E402
from floor import FloorActivities, floor_activities, floor_worker, plain_loop  # noqa: E402
from history_phases import (  # noqa: E402
    WORKFLOW_TASK,
    HistoryFigures,
    after_last_activity,
    analyse,
    is_execution_started,
    is_signal,
    per_step_ms,
    whole_workflow,
)
from processes import MachineCpu, cpu_seconds, temporal_server_pid  # noqa: E402
from scenario import (  # noqa: E402
    AGENT,
    SCRIPT,
    USER_TEXT,
    add_eager_flag,
    add_quick_tools_flag,
    add_script,
    add_tool,
    bench_definitions,
    eager_worker,
    floor_input,
    use_quick_tools,
)
from support import (  # noqa: E402
    local_stack,
    run_histories,
    scratch_config,
    start_thread,
    wait_until,
)
from temporalio.client import Client  # noqa: E402
from worker_probe import OUTSIDE, Bucket, WorkerProbe  # noqa: E402

from weft.contract.thread import SIGNAL_QUEUE_MESSAGE, SIGNAL_TERMINATE  # noqa: E402
from weft.definitions import Definitions  # noqa: E402
from weft.workers.agent_worker import AgentWorker  # noqa: E402
from weft.workers.scripted_model import ScriptedModelServer  # noqa: E402

MODEL_CALL = "model.call"  # weft's model activity: the last one of a turn ends it
TARGET_RATIO = 1.15
TARGET_GROWTH = 0.10


@dataclass
class Sample:
    """One run of one side."""

    steps: int
    history: HistoryFigures
    worker: dict[str, Bucket] = field(default_factory=dict)

    @property
    def ms_per_step(self) -> float:
        return self.history.span_seconds / self.steps * 1000


@dataclass
class LoopSample:
    """One run of the plain in-process loop."""

    steps: int
    seconds: float

    @property
    def ms_per_step(self) -> float:
        return self.seconds / self.steps * 1000


@dataclass
class Runs:
    """The runs of one K, each side's."""

    loop: list[LoopSample] = field(default_factory=list)
    floor: list[Sample] = field(default_factory=list)
    weft: list[Sample] = field(default_factory=list)

    def overhead(self, side: list[Sample]) -> float:
        """A side's median ms/step less the loop's: what it adds to the model and tool."""
        return median_ms(side) - median_ms(self.loop)

    def paired_ratios(self) -> list[float]:
        """Each run's weft overhead over its floor overhead, both less that run's loop.
        The three ran one after the other, so a drift of the machine's speed between
        runs (this machine's moved by half within minutes) mostly cancels."""
        return [
            (w.ms_per_step - loop.ms_per_step) / (f.ms_per_step - loop.ms_per_step)
            for loop, f, w in zip(self.loop, self.floor, self.weft, strict=True)
        ]

    def overhead_ratio(self) -> float:
        """The median of the runs' paired ratios: what the target is judged on."""
        return statistics.median(self.paired_ratios())


async def run_loop(activities: FloorActivities, definitions: Definitions, calls: int) -> LoopSample:
    """One plain loop of `calls` add calls and an answer, no Temporal."""
    began = time.perf_counter()
    steps = await plain_loop(activities, floor_input(definitions))
    seconds = time.perf_counter() - began
    assert steps == calls + 1, f"the loop made {steps} model calls, not {calls + 1}"
    return LoopSample(steps, seconds)


async def run_floor(client: Client, queue: str, definitions: Definitions, calls: int) -> Sample:
    """One floor workflow of `calls` add calls and an answer."""
    handle = await client.start_workflow(
        FLOOR_WORKFLOW, floor_input(definitions), id=f"floor-{uuid.uuid4().hex}", task_queue=queue
    )
    steps = await handle.result()
    assert steps == calls + 1, f"the floor made {steps} model calls, not {calls + 1}"
    assert handle.first_execution_run_id is not None
    histories = await run_histories(client, handle.id, handle.first_execution_run_id)
    return Sample(steps, analyse(histories, begins=is_execution_started, ends_after=whole_workflow))


async def run_weft(client: Client, queue: str, probe: WorkerProbe, calls: int) -> Sample:
    """One AgentThread turn of `calls` add calls and an answer, timed from its message."""
    started = await start_thread(client, queue, agent=AGENT, options={"maxTotalSteps": calls + 5})
    assert started.first_execution_run_id is not None
    # No run id: the thread may continue as new within the turn, and the handle follows it.
    thread = client.get_workflow_handle(started.id)
    await wait_until(thread, lambda s: s.status == "waiting_input")
    probe.reset()
    await thread.signal(SIGNAL_QUEUE_MESSAGE, {"role": "user", "content": USER_TEXT})
    # Polled slowly: each poll is a query the worker answers; the time comes from history.
    state = await wait_until(
        thread,
        lambda s: s.status == "waiting_input" and s.counters.turns >= 1,
        timeout=1800,
        interval=0.25,
    )
    worker = probe.snapshot()
    assert state.counters.steps == calls + 1, f"weft ran {state.counters.steps} steps"
    histories = await run_histories(client, started.id, started.first_execution_run_id)
    await thread.signal(SIGNAL_TERMINATE, {})
    await wait_closed(thread)
    figures = analyse(
        histories,
        begins=is_signal(SIGNAL_QUEUE_MESSAGE),
        ends_after=after_last_activity(MODEL_CALL),
    )
    return Sample(calls + 1, figures, worker)


async def wait_closed(handle: Any) -> None:
    """Wait until the terminated thread's run has closed, so its wind-down does not overlap
    the next measured run."""
    deadline = time.monotonic() + 60
    while (await handle.describe()).close_time is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{handle.id} did not close after terminate")
        await asyncio.sleep(0.1)


def median_sample(samples: list[Sample]) -> Sample:
    """The run whose ms/step is the median (the upper one of an even count)."""
    return sorted(samples, key=lambda s: s.ms_per_step)[len(samples) // 2]


def median_ms(samples: Sequence[Sample | LoopSample]) -> float:
    return statistics.median(s.ms_per_step for s in samples)


def report_size(calls: int, runs: int, got: Runs) -> None:
    """The headline figures of one K, then the breakdowns of the floor and weft."""
    loop_ms, floor_ms, weft_ms = (median_ms(side) for side in (got.loop, got.floor, got.weft))
    f, w = median_sample(got.floor), median_sample(got.weft)
    print(f"\n== K={calls}: {calls + 1} steps ({calls} add calls + the answer), median of {runs}")
    print(f"{'':34}{'loop':>12}{'floor':>12}{'weft':>12}")
    print(f"{'ms/step':34}{loop_ms:12.2f}{floor_ms:12.2f}{weft_ms:12.2f}")
    spread = [
        f"{min(s.ms_per_step for s in side):.2f}-{max(s.ms_per_step for s in side):.2f}"
        for side in (got.loop, got.floor, got.weft)
    ]
    print(f"{'ms/step range over the runs':34}{spread[0]:>12}{spread[1]:>12}{spread[2]:>12}")
    floor_over, weft_over = got.overhead(got.floor), got.overhead(got.weft)
    print(f"{'overhead ms/step (less the loop)':34}{'':12}{floor_over:12.2f}{weft_over:12.2f}")
    ratio = got.overhead_ratio()
    paired = ", ".join(f"{r:.2f}" for r in got.paired_ratios())
    print(
        f"{'overhead ratio weft/floor':34}{'':24}{ratio:11.2f}x  "
        f"(target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'})"
    )
    print(f"  (median of each run's ratio, the three sides run back to back: {paired})")
    print(f"{'ratio of the median overheads':34}{'':24}{weft_over / floor_over:11.2f}x")
    print(f"{'ms/step ratio weft/floor':34}{'':24}{weft_ms / floor_ms:11.2f}x")
    for label, value in (
        ("history bytes/step", lambda s: f"{s.history.total_bytes / s.steps:.0f}"),
        ("largest history event (bytes)", lambda s: f"{s.history.largest_event_bytes}"),
        ("history events/step", lambda s: f"{s.history.events / s.steps:.1f}"),
        ("workflow runs (continue-as-new)", lambda s: f"{s.history.runs}"),
    ):
        print(f"{label:34}{'':12}{value(f):>12}{value(w):>12}")
    print(
        f"{'largest event type':34}floor {f.history.largest_event_type}, "
        f"weft {w.history.largest_event_type}"
    )
    report_history_phases(f, w)
    report_worker(w)


def report_history_phases(floor: Sample, weft: Sample) -> None:
    """Per step, from server timestamps: count, queued and running ms of each phase."""
    print("Temporal history, per step (count/step, queued = scheduled->started ms,")
    print("running = started->completed ms):")
    for side, sample in (("floor", floor), ("weft", weft)):
        print(f"  {side}:")
        history = sample.history
        names = sorted(history.phases, key=lambda n: (n != WORKFLOW_TASK, n))
        for name in names:
            phase = history.phases[name]
            print(
                f"    {name:26} {phase.count / sample.steps:5.2f}/step"
                f"  queued {per_step_ms(phase.queued, sample.steps):6.2f}"
                f"  running {per_step_ms(phase.running, sample.steps):6.2f}"
            )
        other = history.span_seconds - history.accounted_seconds()
        print(
            f"    {'between tasks (span - phases)':26} {'':10}{'':9}"
            f"{per_step_ms(other, sample.steps):6.2f} ms"
        )


def report_worker(weft: Sample) -> None:
    """Per step, inside the weft worker: each activity type's own time, split."""
    steps = weft.steps
    print("weft worker, in process, ms per step (n = count per step):")
    header = (
        f"    {'activity':18}{'n':>5}{'in worker':>10}{'SQL n':>7}{'SQL':>7}"
        f"{'commit n':>9}{'commit':>7}{'provider':>9}{'rest*':>7}{'dispatch**':>11}"
    )
    print(header)
    history_running = {name: p.running for name, p in weft.history.phases.items()}
    total = Bucket()
    for name in sorted(weft.worker, key=lambda n: (n == OUTSIDE, n)):
        bucket = weft.worker[name]
        for key, value in vars(bucket).items():
            setattr(total, key, getattr(total, key) + value)
        dispatch = (
            f"{(history_running[name] - bucket.activity_seconds) / steps * 1000:11.2f}"
            if name in history_running
            else f"{'local/none':>11}"
        )
        print(_worker_row(name, bucket, steps) + dispatch)
    print(_worker_row("all", total, steps))
    print(
        "    * rest = in worker - SQL - commit - provider: context assembly, serialization\n"
        "      and everything else. ** dispatch = history running - in worker: the Temporal\n"
        "      round trip of starting and completing the task. Local activities (store.flush)\n"
        "      run inside workflow tasks, so history has no time of their own for them."
    )


def _worker_row(name: str, b: Bucket, steps: int) -> str:
    def ms(seconds: float) -> str:
        return f"{seconds / steps * 1000:.2f}"

    return (
        f"    {name[:18]:18}{b.activities / steps:5.2f}{ms(b.activity_seconds):>10}"
        f"{b.statements / steps:7.1f}{ms(b.statement_seconds):>7}"
        f"{b.commits / steps:9.2f}{ms(b.commit_seconds):>7}{ms(b.provider_seconds):>9}"
        f"{ms(b.rest_seconds()) if b.activities else '':>7}"
    )


def report_growth(sizes: list[int], results: dict[int, Runs]) -> None:
    """How ms/step, overhead and the ratio move with K."""
    print("\n== summary (ms/step, medians; overhead = side - loop)")
    print(
        f"{'K':>6}{'loop':>9}{'floor':>9}{'weft':>9}{'floor over':>12}{'weft over':>11}"
        f"{'over ratio*':>12}{'ms ratio':>10}"
    )
    for calls in sizes:
        got = results[calls]
        floor_over, weft_over = got.overhead(got.floor), got.overhead(got.weft)
        print(
            f"{calls:>6}{median_ms(got.loop):9.2f}{median_ms(got.floor):9.2f}"
            f"{median_ms(got.weft):9.2f}{floor_over:12.2f}{weft_over:11.2f}"
            f"{got.overhead_ratio():11.2f}x{median_ms(got.weft) / median_ms(got.floor):9.2f}x"
        )
    print("  * the median of each run's paired overhead ratio")
    if len(sizes) > 1:
        low, high = results[sizes[0]], results[sizes[-1]]
        span = f"K={sizes[0]} -> K={sizes[-1]}"
        for side in ("weft", "floor"):
            rounds = round_growths(low, high, side)
            growth = statistics.median(rounds)
            verdict = ""
            if side == "weft":
                met = "met" if growth < TARGET_GROWTH else "NOT met"
                verdict = f" (target < {TARGET_GROWTH:.0%}: {met})"
            print(f"{side} overhead growth {span}: {growth:+.1%}{verdict}")
            each = ", ".join(f"{g:+.0%}" for g in rounds)
            of_medians = high.overhead(getattr(high, side)) / low.overhead(getattr(low, side)) - 1
            print(f"  (median of each round's growth: {each}; of the medians: {of_medians:+.1%})")
        for side in ("loop", "floor", "weft"):
            growth = median_ms(getattr(high, side)) / median_ms(getattr(low, side)) - 1
            print(f"{side} ms/step growth {span}: {growth:+.1%}")
    worst = max(got.overhead_ratio() for got in results.values())
    print(
        f"worst overhead ratio {worst:.2f}x (target <= {TARGET_RATIO}x at every K: "
        f"{'met' if worst <= TARGET_RATIO else 'NOT met'})"
    )


def round_growths(low: Runs, high: Runs, side: str) -> list[float]:
    """Each round's growth of the side's overhead (less that round's loop) from the low K to
    the high one: the two ran minutes apart at most, in the same round."""
    growths = []
    for i in range(len(low.loop)):
        low_over = getattr(low, side)[i].ms_per_step - low.loop[i].ms_per_step
        high_over = getattr(high, side)[i].ms_per_step - high.loop[i].ms_per_step
        growths.append(high_over / low_over - 1)
    return growths


async def main(sizes: list[int], runs: int, eager: str) -> None:
    """Warm every side up, then in each round, for each K, run loop, floor and weft."""
    definitions = bench_definitions()
    probe = WorkerProbe()
    probe.install()
    results: dict[int, Runs] = {}
    # The scripted server keeps no requests: each holds its whole transcript, and in this
    # process they would grow the heap every garbage collection walks, for every side.
    async with local_stack(max_records=0) as (client, scripted, address):
        server_pid = temporal_server_pid(address)
        base_url, tool = scripted.openai_base_url, add_tool(definitions)
        with tempfile.TemporaryDirectory() as tmp:
            floor_queue = f"floor-{uuid.uuid4().hex[:8]}"
            async with (
                floor_activities(base_url, tool) as loop,
                floor_worker(client, floor_queue, base_url, tool),
                AgentWorker(
                    probe.client(client),
                    scratch_config(tmp).model_copy(update={"worker": eager_worker(eager)}),
                    definitions=definitions,
                    task_queue=f"weft-{uuid.uuid4().hex[:8]}",
                    scripted=scripted,
                ) as weft_worker,
            ):
                weft_queue = weft_worker.task_queue
                print("warming up every side (K=5) ...", flush=True)
                await play(scripted, 5)
                await run_loop(loop, definitions, 5)
                await run_floor(client, floor_queue, definitions, 5)
                await run_weft(client, weft_queue, probe, 5)
                # Rounds over every K, so a drift of the machine's speed in the minutes a
                # run takes falls on every K alike, not on the last K most.
                results = {calls: Runs() for calls in sizes}
                load = OtherLoad(server_pid)
                for run in range(runs):
                    for calls in sizes:
                        print(f"round {run + 1}/{runs}: K={calls}", flush=True)
                        await play(scripted, calls)
                        got = results[calls]
                        got.loop.append(await run_loop(loop, definitions, calls))
                        got.floor.append(await run_floor(client, floor_queue, definitions, calls))
                        got.weft.append(await run_weft(client, weft_queue, probe, calls))
                for calls in sizes:
                    report_size(calls, runs, results[calls])
                print(load.render())
    probe.uninstall()
    report_growth(sizes, results)


class OtherLoad:
    """How busy the machine was with processes other than this one and its dev server."""

    def __init__(self, server_pid: int | None) -> None:
        self._server_pid = server_pid
        self._machine = MachineCpu.now()
        self._ours = self._our_cpu()

    def _our_cpu(self) -> float:
        server = cpu_seconds(self._server_pid) if self._server_pid else 0.0
        return time.process_time() + server

    def render(self) -> str:
        """A line for the report: busy share of all cores, and the part others used."""
        machine = MachineCpu.now()
        total = machine.total - self._machine.total
        busy = machine.busy - self._machine.busy
        other = max(0.0, busy - (self._our_cpu() - self._ours))
        server = "" if self._server_pid else " (dev server not found: counted as other)"
        return (
            f"machine during these runs: {busy / total:.0%} of all cores busy, "
            f"{other / total:.0%} by processes other than this one and its dev server{server}"
        )


async def play(scripted: ScriptedModelServer, calls: int) -> None:
    """Make the shared script call add `calls` times before it answers."""
    scripted.set_script(SCRIPT, add_script(calls))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--steps", default="20,80,400", help="add calls per run (K), comma-separated"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        help="runs per side and K (medians; the paired ratio needs several)",
    )
    add_eager_flag(parser)
    add_quick_tools_flag(parser)
    args = parser.parse_args()
    use_quick_tools(args.quick_tools)
    asyncio.run(main([int(k) for k in args.steps.split(",")], args.runs, args.eager))
