"""Where a `weft worker` process spends its CPU per step, under N concurrent conversations.

Run: `.venv/bin/python bench/profile_worker.py [--threads 50] [--calls 9] [--interval-ms 1]
[--top 20] [--store URL]`.

N conversations of the benchmark scenario (bench/scenario.py: the model calls `add`
`--calls` times, then answers) start at once against one `weft worker` subprocess on a
tuned dev server and a SQLite store (or `--store`). The worker runs with a sampler thread:
every interval it reads each Python thread's own CPU clock (`pthread_getcpuclockid`) and
its stack (`sys._current_frames()`), and charges the CPU the thread used since the last
sample to the stack it is in now. A thread found waiting (in `select`, a lock or a queue)
has its CPU since the last sample charged to the stacks it was found running in, in
proportion (the thread ran, then blocked, between two samples); the share so spread is
printed. The process's CPU that no Python thread used is the native threads' (the Temporal
core SDK's Rust runtime, SQLite and the like running without the GIL are charged to the
Python thread that called them).

Printed, in ms of CPU per step (steps = N x (calls + 1); two warm-up conversations run
first and are not measured):
- the process's CPU, the Python threads' by role (the event loop, the workflow
  activation threads, the executor threads of `asyncio.to_thread`, the rest) and native;
- components, inclusive (a stack counts for every component it passes through): workflow
  activations and the sandbox's machinery, weft's workflow code, payload conversion (the
  SDK's converter, weft's transport), activities and weft's activity code, the store and
  SQLAlchemy, pydantic, httpx, logging, the SDK's bridge;
- the innermost frame's package (self time), the top functions by self time and the top
  weft functions by inclusive time;
- the SQL statements per step, in all and by their shape (values left out): on SQLite every
  statement the library ran (its trace callback: Core's, the driver cursor's, BEGIN and
  COMMIT), on another database those through SQLAlchemy's cursor events.
The sampler costs CPU of its own (its thread is not counted) and slows the worker a little;
the shares are what matters, the absolute figures are a few percent high.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

# A frame whose code is one of these, innermost, is a thread waiting, not working.
WAITS = {
    ("selectors.py", "select"),
    ("threading.py", "wait"),
    ("threading.py", "_wait_for_tstate_lock"),
    ("thread.py", "_worker"),  # concurrent.futures: an idle executor thread
    ("queue.py", "get"),
    ("profile_worker.py", "_sample_forever"),
}

# Inclusive components: a stack counts for each whose pattern one of its frames matches
# (on "path:function", the path relative to the repository or to site-packages).
COMPONENTS: list[tuple[str, str]] = [
    ("workflow activation (SDK, in the sandbox)", r"^temporalio/worker/_workflow_instance\.py:"),
    ("  sandbox machinery", r"^temporalio/worker/workflow_sandbox/"),
    ("  weft workflow code", r"^workflows/"),
    ("  weft contract (pydantic models, rules)", r"^contract/"),
    ("payload conversion (SDK converter)", r"^temporalio/converter"),
    ("  weft transport (converter, codec)", r"^transport/"),
    ("activity execution (SDK)", r"^temporalio/worker/_activity\.py:"),
    ("  weft activities", r"^activities/"),
    ("  weft store", r"^store/"),
    ("  SQLAlchemy", r"^sqlalchemy/"),
    ("  model provider I/O (httpx, httpcore)", r"^(httpx|httpcore|h11)/"),
    ("pydantic (anywhere)", r"^(pydantic|pydantic_core)/"),
    ("json (stdlib, anywhere)", r"^json/"),
    ("logging (anywhere)", r"^logging/"),
    ("SDK bridge (Rust calls, protobuf)", r"^temporalio/bridge/"),
    ("weft workers (interceptors, gate, gc)", r"^workers/"),
]

ROLES = [
    ("event loop", r"^MainThread$"),
    ("workflow activations", r"^(temporal_workflow|ThreadPoolExecutor-0)"),
    ("asyncio.to_thread executors", r"^asyncio_"),
]


def short_path(path: str) -> str:
    """A frame's file relative to the repository (weft's own, `weft/` dropped) or to the
    stdlib / site-packages folder."""
    marker = "site-packages/"
    if marker in path:
        return path[path.index(marker) + len(marker) :]
    if "/weft/" in path:  # weft's own, through its package (this tree or another on the path)
        return path[path.index("/weft/") + len("/weft/") :]
    if path.startswith(str(ROOT) + "/"):
        return path[len(str(ROOT)) + 1 :]
    match = re.search(r"/python3\.\d+/(.*)$", path)
    return match.group(1) if match else path


# --- the sampler, in the worker process -------------------------------------------------


@dataclass
class Samples:
    """CPU seconds charged per stack (a tuple of "path:function", outermost first) and
    per thread role, since the last reset."""

    stacks: defaultdict[tuple[str, ...], float] = field(default_factory=lambda: defaultdict(float))
    roles: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    spread: float = 0.0  # CPU of threads found waiting, charged in proportion
    process_cpu_began: float = 0.0
    wall_began: float = 0.0
    samples: int = 0
    statements: Counter[str] = field(default_factory=Counter)  # by their first words


class Sampler:
    """Samples every Python thread's stack and CPU clock from a thread of its own."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._samples = Samples()
        self._last: dict[int, float] = {}
        self._clocks: dict[int, int] = {}
        self._codes: dict[Any, str] = {}
        self._waiting: dict[str, float] = defaultdict(float)  # by role, awaiting spreading
        self._running: defaultdict[str, defaultdict[tuple[str, ...], float]] = defaultdict(
            lambda: defaultdict(float)
        )

    def count_statement(self, sql: str) -> None:
        # SQLite's trace gives the statement with its values: counted without them. A lost
        # increment between threads is noise here.
        shape = re.sub(r"\b\d+(\.\d+)?\b", "?", re.sub(r"'(?:[^']|'')*'", "?", sql))
        self._samples.statements[" ".join(shape.split())[:110]] += 1

    def start(self) -> None:
        threading.Thread(target=self._sample_forever, name="profile-sampler", daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self._samples = Samples(
                process_cpu_began=time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID),
                wall_began=time.perf_counter(),
            )
            self._waiting.clear()
            self._running.clear()

    def dump(self, path: Path) -> None:
        with self._lock:
            s = self._samples
            stacks = defaultdict(float, s.stacks)
            spread = 0.0
            # CPU of threads found waiting: charged to the stacks that thread role was found
            # running in, in proportion to their CPU.
            for role, seconds in self._waiting.items():
                running = self._running.get(role)
                total = sum(running.values()) if running else 0.0
                if not running or total <= 0:
                    stacks[(f"({role}: ran, then waited)",)] += seconds
                    continue
                for stack, share in running.items():
                    stacks[stack] += seconds * share / total
                spread += seconds
            result = {
                "process_cpu": time.clock_gettime(time.CLOCK_PROCESS_CPUTIME_ID)
                - s.process_cpu_began,
                "wall": time.perf_counter() - s.wall_began,
                "samples": s.samples,
                "statements": dict(s.statements),
                "spread": spread,
                "roles": dict(s.roles),
                "stacks": [[list(k), v] for k, v in stacks.items()],
            }
        path.write_text(json.dumps(result))

    def _code_name(self, frame: FrameType) -> str:
        code = frame.f_code
        name = self._codes.get(code)
        if name is None:
            name = f"{short_path(code.co_filename)}:{code.co_name}"
            self._codes[code] = name
        return name

    def _sample_forever(self) -> None:
        me = threading.get_ident()
        while True:
            time.sleep(self._interval)
            names = {t.ident: t.name for t in threading.enumerate()}
            frames = sys._current_frames()
            with self._lock:
                self._samples.samples += 1
                for ident, frame in frames.items():
                    if ident == me:
                        continue
                    self._sample(ident, frame, names.get(ident, "?"))

    def _sample(self, ident: int, frame: FrameType, name: str) -> None:
        clock = self._clocks.get(ident)
        if clock is None:
            try:
                clock = time.pthread_getcpuclockid(ident)
            except OSError:
                return
            self._clocks[ident] = clock
        try:
            now = time.clock_gettime(clock)
        except OSError:
            return
        used = now - self._last.get(ident, now)
        self._last[ident] = now
        role = next((r for r, pattern in ROLES if re.match(pattern, name)), f"other: {name}")
        role = re.sub(r"_?\d+$", "", role)
        if used <= 0:
            return
        self._samples.roles[role] += used
        leaf = frame.f_code
        leaf_key = (Path(leaf.co_filename).name, leaf.co_name)
        if leaf_key in WAITS:
            self._waiting[role] += used
            return
        stack: list[str] = []
        current: FrameType | None = frame
        while current is not None:
            stack.append(self._code_name(current))
            current = current.f_back
        key = tuple(reversed(stack))
        self._samples.stacks[key] += used
        self._running[role][key] += used


def count_statements(sampler: Sampler) -> None:
    """Count every statement the worker's store runs: on SQLite, each one the library ran
    (its trace callback: Core's and the driver's cursor's alike, BEGIN and COMMIT too); on
    another database, each one through SQLAlchemy's cursor events."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _trace(dbapi_connection: Any, _record: Any) -> None:
        if hasattr(dbapi_connection, "set_trace_callback"):  # sqlite3
            dbapi_connection.set_trace_callback(sampler.count_statement)

    @event.listens_for(Engine, "before_cursor_execute")
    def _core(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if conn.dialect.name != "sqlite":
            sampler.count_statement(statement)


def worker_child(config: str, out: Path, interval: float) -> None:
    """The worker process: `weft worker` with the sampler; SIGUSR1 resets it, SIGUSR2
    writes what it measured since to `out`."""
    from weft.cli.main import run

    # A sampler can only look while it holds the GIL: without this, it would see a thread
    # busy in Python only when the thread gives the GIL up (I/O, a lock) or after the
    # default 5 ms switch interval, so its samples would pile up on I/O calls.
    sys.setswitchinterval(min(interval / 10, 0.0001))
    sampler = Sampler(interval)
    sampler.start()
    count_statements(sampler)

    def on_reset(*_: Any) -> None:
        sampler.reset()
        print("profile: reset", flush=True)

    def on_dump(*_: Any) -> None:
        sampler.dump(out)
        print("profile: dumped", flush=True)

    signal.signal(signal.SIGUSR1, on_reset)
    signal.signal(signal.SIGUSR2, on_dump)
    code = run(["--config", config, "worker"])
    sys.stdout.flush()
    os._exit(code)


# --- the driver ---------------------------------------------------------------------------


async def wait_for_line(worker: Any, text: str, timeout: float = 60) -> None:
    """Until the worker printed a line holding `text` (its output is drained as it comes)."""
    deadline = time.monotonic() + timeout
    while text not in worker.output():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker never printed {text!r}:\n{worker.output()}")
        await asyncio.sleep(0.01)


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Run the worker under the sampler and the conversations against it; what it measured."""
    import uuid

    from bench_load_compare import Stack, wait_for_turn_ends, write_worker_config
    from processes import WorkerSubprocess
    from scenario import AGENT, SCRIPT, USER_TEXT, add_script, bench_definitions, eager_worker
    from support import local_stack, start_thread

    from weft.store import Store

    bench_definitions()
    async with local_stack(max_records=0) as (client, scripted, address):
        scripted.set_script(SCRIPT, add_script(args.calls))
        with tempfile.TemporaryDirectory() as tmp:
            stack = Stack(
                client,
                scripted,
                address,
                Path(tmp),
                None,
                eager_worker(args.eager).model_dump(by_alias=True, mode="json"),
            )
            queue = f"weft-profile-{uuid.uuid4().hex[:8]}"
            url = args.store or f"sqlite:///{Path(tmp) / 'profile.db'}"
            config = write_worker_config(stack, queue, url)
            out = Path(tmp) / "profile.json"
            worker = WorkerSubprocess(
                sys.executable,
                __file__,
                "--child",
                str(config),
                "--out",
                str(out),
                "--interval-ms",
                str(args.interval_ms),
            )
            store = await asyncio.to_thread(Store.open, url)
            steps = args.calls + 1

            async def conversations(count: int) -> None:
                handles = await asyncio.gather(
                    *(
                        start_thread(
                            client,
                            queue,
                            agent=AGENT,
                            options={"maxTotalSteps": steps + 5},
                            messages=[{"role": "user", "content": USER_TEXT}],
                        )
                        for _ in range(count)
                    )
                )
                ends = await wait_for_turn_ends(store, [h.id for h in handles])
                failed = [t for t, e in ends.items() if e != "turn.completed"]
                if failed:
                    raise RuntimeError(f"{len(failed)} conversations failed, e.g. {failed[0]}")

            try:
                await worker.start()
                await conversations(2)  # imports and the sandbox's set-up: not measured
                os.kill(worker.pid, signal.SIGUSR1)
                await wait_for_line(worker, "profile: reset")
                began = time.perf_counter()
                await conversations(args.threads)
                seconds = time.perf_counter() - began
                os.kill(worker.pid, signal.SIGUSR2)
                await wait_for_line(worker, "profile: dumped")
                result: dict[str, Any] = json.loads(out.read_text())
            finally:
                await worker.stop()
                store.close()
    result["steps"] = args.threads * steps
    result["seconds"] = seconds
    return result


def report(result: dict[str, Any], top: int) -> None:
    steps = result["steps"]
    per_step = 1000 / steps
    stacks = [(tuple(k), v) for k, v in result["stacks"]]
    sampled = sum(v for _, v in stacks)
    python = sum(result["roles"].values())
    process = result["process_cpu"]
    print(
        f"{steps} steps in {result['seconds']:.1f} s: {steps / result['seconds']:.1f} steps/s; "
        f"{result['samples']} samples"
    )
    statements = Counter(result.get("statements", {}))
    print(f"SQL statements: {statements.total() / steps:.2f} per step")
    print(f"\nworker process CPU: {process * per_step:6.2f} ms/step")
    for role, seconds in sorted(result["roles"].items(), key=lambda r: -r[1]):
        print(f"  {role:44}{seconds * per_step:6.2f}")
    print(f"  {'native threads (Temporal core, …)':44}{(process - python) * per_step:6.2f}")
    print(
        f"  (CPU of threads found waiting, spread over their running stacks: "
        f"{result['spread'] / max(python, 1e-9):.0%} of the Python threads')"
    )

    print("\ncomponents, inclusive (ms/step, share of the Python threads' CPU):")
    for label, pattern in COMPONENTS:
        regex = re.compile(pattern)
        seconds = sum(v for k, v in stacks if any(regex.search(f) for f in k))
        print(f"  {label:48}{seconds * per_step:6.2f}  {seconds / sampled:5.1%}")

    def package(frame: str) -> str:
        path = frame.split(":", 1)[0]
        parts = path.split("/")
        if parts[0] in ("temporalio", "sqlalchemy") and len(parts) > 2:
            return "/".join(parts[:2])
        return parts[0] if len(parts) > 1 else path

    leaves: Counter[str] = Counter()  # float seconds: Counter's ranking, not its counts
    selfs: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    weft_roots = ("workflows/", "activities/", "store/", "contract/", "transport/", "workers/")
    for stack, seconds in stacks:
        leaves[package(stack[-1])] += seconds
        selfs[stack[-1]] += seconds
        for frame in set(stack):
            if frame.startswith(weft_roots):
                inclusive[frame] += seconds
    print("\nself time by the innermost frame's package (ms/step):")
    for name, seconds in leaves.most_common(top):
        print(f"  {name:60}{seconds * per_step:6.2f}")
    print("\nfunctions by self time (ms/step):")
    for name, seconds in selfs.most_common(top):
        print(f"  {name:80}{seconds * per_step:6.2f}")
    print("\nweft functions by inclusive time (ms/step):")
    for name, seconds in inclusive.most_common(top):
        print(f"  {name:80}{seconds * per_step:6.2f}")
    print("\nSQL statements per step, by their first words:")
    for sql, count in statements.most_common(top):
        print(f"  {count / steps:6.2f}  {sql}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=50, help="conversations at once")
    parser.add_argument("--calls", type=int, default=9, help="add calls per conversation")
    parser.add_argument("--interval-ms", type=float, default=1.0, help="sampling interval")
    parser.add_argument("--top", type=int, default=20, help="rows in each ranking")
    parser.add_argument("--store", help="the worker's store URL (default: a scratch SQLite)")
    parser.add_argument("--eager", default="gated", choices=["gated", "off", "always"])
    parser.add_argument("--json", type=Path, help="also write the raw samples here")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the worker process: its config
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        assert args.out is not None
        worker_child(args.child, args.out, args.interval_ms / 1000)
    measured = asyncio.run(drive(args))
    if args.json:
        args.json.write_text(json.dumps(measured))
    report(measured, args.top)
