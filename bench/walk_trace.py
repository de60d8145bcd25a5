"""The walk of one message: which of the project's files Python enters, in order, from
`Thread.send` to the provider adapter's HTTP request, on the real stack.

Run: `.venv/bin/python bench/walk_trace.py [--verbose]` (about 5 s). It starts a throwaway
dev server (the bundled `temporal`, tuned as in temporal-dev.yml), the scripted model
server on loopback and a `weft.Worker` in this process, sends one message to warm
everything up (imports, the workflow cache, pools), then traces the second with a profile
hook in every thread (`threading.setprofile` before the worker starts its threads). The
workflow runs in weft's usual sandboxed runner; its activations run in the SDK's
`temporal_workflow_*` threads, where the hook sees them like any other code.

Only calls into code under the tree's top-level packages count (site-packages, tests and
bench do not), and only fresh calls: a coroutine resuming after an `await` is not a new
entry. The legs, each the calls of one causal path:

- client: in the task that calls `Thread.send`, until it returns (the signal is sent);
- workflow: in the workflow threads, from the activation that carries the
  `queue_message` signal (weft's runner included) to the workflow scheduling `model.call`;
- on the way: any activity the workflow runs before `model.call` (a local one, say);
- activity: in the `model.call` activity task (its interceptors included, and the store's
  `asyncio.to_thread` calls, which inherit its context), until it first calls httpx's
  client.

Per leg: the distinct files entered, the moves from one file to another (successive calls
in one file are one stop), how many of those moves return to a file the leg had already
left, the distinct moves (edges: a loop over N items repeats its moves N times, not its
edges) and the calls. `--verbose` prints each leg's stops in order. Project code the worker
runs meanwhile outside these paths (pollers, monitors) is listed apart, as not the walk.

To measure another tree, e.g. an older commit, put it first on the path:
`git archive <commit> | tar x -C /tmp/old && PYTHONPATH=/tmp/old .venv/bin/python
bench/walk_trace.py`; the first line says which tree was traced. The script uses only what
older trees have too: `weft.connect`, `weft.Worker`, `weft.Thread`, the definitions API, the
dev server and the scripted model server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import dis
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from inspect import CO_ASYNC_GENERATOR, CO_COROUTINE, CO_GENERATOR
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import weft
from weft.workers.config import DevServerConfig
from weft.workers.dev_server import DevServer, free_port
from weft.workers.scripted_model import ScriptedModelServer

PACKAGES = frozenset(
    {
        "activities",
        "api",
        "cli",
        "client",
        "contract",
        "definitions",
        "store",
        "transport",
        "weft",
        "workers",
        "workflows",
    }
)
SIGNAL = "queue_message"
ACTIVITY = "model.call"
SCRIPT = "walk"
AGENT = "walker"
# As temporal-dev.yml tunes the dev server: the stock transfer queue adds ~50 ms per task.
DYNAMIC_CONFIG = {"history.transferProcessorMaxPollRPS": 10000}
SEARCH_ATTRIBUTES = {
    name: "Keyword"
    for name in ("WeftAgent", "WeftStatus", "WeftParentThread", "WeftSession")
    + ("WeftAwaitingAction", "WeftForkedFrom")
}
WAIT_SECONDS = 60.0
COLUMNS = ("files", "moves", "returns", "edges", "calls")
GENERATOR_FLAGS = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
# Where the walk's ends and its workflow thread are recognised in the SDKs.
WORKFLOW_THREADS = "temporal_workflow_"
EXECUTOR_FILE = os.path.join("concurrent", "futures", "thread.py")
HTTPX_CLIENT_FILE = os.path.join("httpx", "_client.py")
ACTIVITY_WORKER_FILE = os.path.join("temporalio", "worker", "_activity.py")

# The leg a task's calls belong to ("client", or the activity type of an activity task);
# tasks and `asyncio.to_thread` calls inherit it.
LEG: contextvars.ContextVar[str | None] = contextvars.ContextVar("walk_leg", default=None)


@dataclass
class Leg:
    """The project calls of one leg, in order, as (file, function)."""

    name: str
    calls: list[tuple[str, str]] = field(default_factory=list)
    closed: bool = False

    def stops(self) -> list[tuple[str, str]]:
        """Successive calls in one file make one stop (named by its first function)."""
        stops: list[tuple[str, str]] = []
        for file, function in self.calls:
            if not stops or stops[-1][0] != file:
                stops.append((file, function))
        return stops

    def returns(self) -> list[bool]:
        """For each stop, whether it returns to a file this leg had already left."""
        seen: set[str] = set()
        flags = []
        for file, _ in self.stops():
            flags.append(file in seen)
            seen.add(file)
        return flags

    def figures(self) -> Figures:
        files = [file for file, _ in self.stops()]
        return Figures(
            files=set(files),
            moves=max(len(files) - 1, 0),
            returns=sum(self.returns()),
            edges=set(zip(files, files[1:], strict=False)),
            calls=len(self.calls),
        )


@dataclass
class Figures:
    """One leg's walk, or several legs' together (`+`)."""

    files: set[str]
    moves: int
    returns: int
    # Distinct (from, to) moves: unlike `moves`, not multiplied by a loop's iterations.
    edges: set[tuple[str, str]]
    calls: int

    def __add__(self, other: Figures) -> Figures:
        return Figures(
            self.files | other.files,
            self.moves + other.moves,
            self.returns + other.returns,
            self.edges | other.edges,
            self.calls + other.calls,
        )

    def row(self, name: str) -> str:
        counts = (len(self.files), self.moves, self.returns, len(self.edges), self.calls)
        return f"{name:<50}" + "".join(f"{count:>8}" for count in counts)


class Tracer:
    """A profile hook that sorts the tree's fresh calls into the legs of one message."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = Leg("client: Thread.send -> signal")
        self.workflow = Leg(f"workflow: signal -> {ACTIVITY} scheduled")
        self.activity = Leg(f"activity: {ACTIVITY} -> HTTP request")
        # Activities the workflow ran on the way to `model.call` (local ones included).
        self.side_trips: dict[str, Leg] = {}
        # The worker's own machinery while the message walks: pollers, monitors.
        self.elsewhere: dict[str, Leg] = {}
        self.armed = False
        self.reached_http = threading.Event()
        self.http_call = ""
        self.error: Exception | None = None
        self._workflow_open = False
        self._files: dict[str, str | None] = {}
        self._starts: dict[CodeType, int] = {}
        self._workflow_threads: dict[int, bool] = {}

    def install(self) -> None:
        threading.setprofile(self.hook)
        sys.setprofile(self.hook)

    def uninstall(self) -> None:
        self.armed = False
        threading.setprofile(None)
        sys.setprofile(None)

    def legs(self) -> list[Leg]:
        """The walk: client, workflow, the activities on the way, then `model.call`."""
        return [self.client, self.workflow, *self.side_trips.values(), self.activity]

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not self.armed:
            return
        try:
            if self._in_workflow_thread():
                self._workflow_call(frame)
            else:
                self._other_call(frame)
        except Exception as error:
            # Raised from a profile hook, it would surface in the traced code as its own.
            self.error, self.armed = error, False
            self.reached_http.set()

    def _workflow_call(self, frame: FrameType) -> None:
        code = frame.f_code
        if code.co_name == "workflow_start_activity" and self._workflow_open:
            if frame.f_locals["activity"] == ACTIVITY:
                self._workflow_open, self.workflow.closed = False, True
        elif code.co_name == "run" and code.co_filename.endswith(EXECUTOR_FILE):
            # Each activation is one work item of the SDK's workflow thread pool: the leg
            # opens with the one that carries the signal, before weft's runner sees it.
            if not self.workflow.closed and _carries_signal(frame.f_locals["self"].args):
                self._workflow_open = True
        elif self._workflow_open:
            self._record(self.workflow, frame)
        elif not self.activity.closed:
            self._record_elsewhere("workflow, outside the leg", frame)

    def _other_call(self, frame: FrameType) -> None:
        code = frame.f_code
        starts_activity = code.co_name == "_handle_start_activity_task"
        if (
            starts_activity
            and code.co_filename.endswith(ACTIVITY_WORKER_FILE)
            and self._fresh(frame)
        ):
            LEG.set(frame.f_locals["start"].activity_type)
            return
        leg = LEG.get()
        if self.activity.closed:
            return
        if leg == ACTIVITY and code.co_filename.endswith(HTTPX_CLIENT_FILE):
            self.http_call = f"httpx {code.co_qualname}"
            self.activity.closed = True
            self.reached_http.set()
        elif leg == "client":
            self._record(self.client, frame)
        elif leg == ACTIVITY:
            self._record(self.activity, frame)
        elif leg is not None:
            trip = self.side_trips.setdefault(leg, Leg(f"on the way: activity {leg}"))
            self._record(trip, frame)
        else:
            self._record_elsewhere(f"thread {threading.current_thread().name}", frame)

    def _record(self, leg: Leg, frame: FrameType) -> None:
        code = frame.f_code
        file = self._project_file(code.co_filename)
        if file is not None and not leg.closed and self._fresh(frame):
            leg.calls.append((file, code.co_qualname))

    def _record_elsewhere(self, where: str, frame: FrameType) -> None:
        if self._project_file(frame.f_code.co_filename) is not None:
            self._record(self.elsewhere.setdefault(where, Leg(where)), frame)

    def _in_workflow_thread(self) -> bool:
        ident = threading.get_ident()
        known = self._workflow_threads.get(ident)
        if known is None:
            known = threading.current_thread().name.startswith(WORKFLOW_THREADS)
            self._workflow_threads[ident] = known
        return known

    def _project_file(self, filename: str) -> str | None:
        """`filename` relative to the tree when it is under one of its packages."""
        if filename not in self._files:
            real = Path(os.path.realpath(filename))
            relative = real.relative_to(self.root) if real.is_relative_to(self.root) else None
            inside = relative is not None and relative.parts[0] in PACKAGES
            self._files[filename] = relative.as_posix() if inside and relative else None
        return self._files[filename]

    def _fresh(self, frame: FrameType) -> bool:
        """Whether this is a new call, not a generator or coroutine resuming: a fresh
        generator frame stands on its `RESUME 0`, a resumed one on a later `RESUME`."""
        code = frame.f_code
        if not code.co_flags & GENERATOR_FLAGS:
            return True
        if code not in self._starts:
            self._starts[code] = next(
                i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"
            )
        return frame.f_lasti == self._starts[code]


def _carries_signal(args: tuple[Any, ...]) -> bool:
    """Whether a work item's arguments are an activation with the `SIGNAL` signal."""
    jobs = getattr(args[0], "jobs", ()) if args else ()
    return any(
        job.WhichOneof("variant") == "signal_workflow" and job.signal_workflow.signal_name == SIGNAL
        for job in jobs
    )


def tree_root() -> Path:
    """The tree `import weft` resolved to (weft/ sits at its top)."""
    return Path(os.path.realpath(weft.__file__)).parent.parent


def dev_server() -> DevServer:
    config = DevServerConfig(
        ui_port=free_port(),
        db_file=None,
        search_attributes=SEARCH_ATTRIBUTES,
        dynamic_config=DYNAMIC_CONFIG,
    )
    return DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=False, ui=False)


def definitions() -> weft.Definitions:
    """One agent whose scripted model answers every message with text (no tools)."""
    return weft.Definitions().add(
        weft.define_model(name="scripted", provider="scripted", model=SCRIPT),
        weft.define_prompt(
            name="walk_prompt", toolDescription="answers", model="scripted", prompt="Answer."
        ),
        weft.define_agent(name=AGENT, sideA={"prompt": "walk_prompt"}),
    )


async def turn_completed(thread: weft.Thread, after: str | None) -> str:
    """Wait for the next `turn.completed` after the event `after`; its event id."""

    async def first() -> str:
        async for event in thread.events(after=after):
            if event.type == "turn.completed":
                return event.event_id
        raise RuntimeError("the event feed ended before turn.completed")

    return await asyncio.wait_for(first(), WAIT_SECONDS)


async def send_traced(tracer: Tracer, thread: weft.Thread, text: str) -> None:
    """Send `text` with the tracer armed; disarm once every leg has ended."""

    async def client_leg() -> None:
        LEG.set("client")
        await thread.send(text)

    tracer.armed = True
    try:
        await asyncio.wait_for(asyncio.create_task(client_leg()), WAIT_SECONDS)
        reached = await asyncio.to_thread(tracer.reached_http.wait, WAIT_SECONDS)
    finally:
        tracer.armed = False
    tracer.client.closed = True
    if tracer.error is not None:
        raise RuntimeError(f"the trace failed: {tracer.error!r}") from tracer.error
    if not (reached and tracer.workflow.closed):
        raise RuntimeError(
            f"the message did not reach the provider's HTTP request within {WAIT_SECONDS} s "
            f"(workflow leg ended: {tracer.workflow.closed}; HTTP reached: {reached})"
        )


async def walk(tracer: Tracer) -> None:
    """Warm the stack with one message, then trace the second."""
    server = dev_server()
    await server.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            reply = {"replies": [{"text": "Noted."}]}
            async with ScriptedModelServer({SCRIPT: reply}) as scripted:
                client = await weft.connect(server.address, root=scratch)
                providers = {"scripted": {"kind": "openai", "baseUrl": scripted.openai_base_url}}
                worker = weft.Worker(
                    client,
                    definitions(),
                    store=f"sqlite:///{Path(scratch) / 'weft.db'}",
                    providers=providers,
                    task_queue=f"walk-{uuid.uuid4().hex[:12]}",
                    root=scratch,
                )
                async with worker as running:
                    thread = await weft.Thread.start(
                        client, AGENT, task_queue=running.task_queue, store=running.store
                    )
                    await thread.send("Warm up.")
                    cursor = await turn_completed(thread, None)
                    # A query is answered once the workflow task that wrote the turn's end
                    # has completed: the traced message then starts on an idle thread.
                    await thread.read()
                    await send_traced(tracer, thread, "The message we follow.")
                    await turn_completed(thread, cursor)
                    await thread.terminate("walk traced")
    finally:
        await server.stop()


def commit_of(root: Path) -> str:
    found = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() if found.returncode == 0 else "not a git checkout"


def report(tracer: Tracer, verbose: bool) -> None:
    root = tracer.root
    print(f"the walk of one message in {root} ({commit_of(root)}); workflow sandboxed")
    print(f"{'leg':<50}" + "".join(f"{h:>8}" for h in COLUMNS))
    total = Figures(set(), 0, 0, set(), 0)
    for leg in tracer.legs():
        figures = leg.figures()
        total += figures
        print(figures.row(leg.name))
    print(total.row("the walk (all legs)"))
    last = " ".join(tracer.activity.calls[-1]) if tracer.activity.calls else "none"
    print(f"the walk ends at {tracer.http_call} (the last project call: {last})")
    for leg in tracer.elsewhere.values():
        print(leg.figures().row(f"not the walk: {leg.name}"))
    if verbose:
        for leg in [*tracer.legs(), *tracer.elsewhere.values()]:
            print(f"\n{leg.name} (<- returns to a file already left):")
            stops = zip(leg.stops(), leg.returns(), strict=True)
            for index, ((file, function), back) in enumerate(stops, start=1):
                print(f"  {index:>3} {'<-' if back else '  '} {file}  {function}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--verbose", action="store_true", help="print each leg's stops")
    args = parser.parse_args()
    tracer = Tracer(tree_root())
    tracer.install()
    try:
        asyncio.run(walk(tracer))
    finally:
        tracer.uninstall()
    report(tracer, args.verbose)


if __name__ == "__main__":
    main()
