"""Helpers for scenario tests: definitions, scripts, starting threads and waiting on them."""

from __future__ import annotations

import asyncio
import base64
import json
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle, WorkflowHistory

from weft.contract.thread import QUERY_THREAD_READ, WORKFLOW_TYPE, ThreadRead
from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from weft.workers.scripted_model import ScriptedModelServer

if TYPE_CHECKING:
    import jsonschema

    from weft.contract.events import Event
    from weft.contract.messages import Message, ToolCall
    from weft.store import Store
    from weft.workers.agent_worker import AgentWorker
    from weft.workers.config import WeftConfig

# The `start_worker` fixture (conftest.py): start(definitions, **AgentWorker options) enters
# an AgentWorker that the fixture closes when the test ends.
StartWorker = Callable[..., Awaitable["AgentWorker"]]


class CityArgs(BaseModel):
    """Arguments of the weather tool."""

    city: str


def weather(state: Any, args: CityArgs) -> dict[str, Any]:
    """A deterministic weather report."""
    return {"city": args.city, "forecast": "sunny", "celsius": 21}


def quick_weather_tool() -> Any:
    """`weather` defined quick: its calls run as local activities."""
    return define_tool(
        name="quick_weather",
        description="Weather for a city, quickly",
        args=CityArgs,
        execute=weather,
        quick=True,
    )


class NoteArgs(BaseModel):
    """Arguments of the note tool."""

    text: str


async def note(state: Any, args: NoteArgs) -> str:
    """Appends a note to the thread's key-value store, to show side effects happen once."""
    notes = await state.get_value("notes") or []
    await state.set_value("notes", [*notes, args.text])
    return f"noted ({len(notes) + 1})"


def explode(state: Any, args: NoteArgs) -> str:
    """A tool that always raises."""
    raise RuntimeError(f"tool exploded on {args.text!r}")


def ephemeral_dev_server() -> Any:
    """A throwaway dev server: free ports, in memory, no UI, tuned as in temporal-dev.yml."""
    from pathlib import Path

    from weft.workers.config import DevServerConfig, load_config
    from weft.workers.dev_server import DevServer, free_port

    tuned = load_config(
        Path(__file__).resolve().parents[1] / "temporal-dev.yml", environ={}
    ).temporal.dev_server
    config = DevServerConfig(
        ui_port=free_port(),
        db_file=None,
        search_attributes=tuned.search_attributes,
        dynamic_config=tuned.dynamic_config,
    )
    return DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=False, ui=False)


@asynccontextmanager
async def local_stack(
    *, max_records: int | None = None
) -> AsyncIterator[tuple[Client, ScriptedModelServer, str]]:
    """A throwaway dev server, a client with weft's search attributes registered, and a
    scripted model server: (client, scripted, temporal address). `max_records`: the
    requests the scripted server keeps (None: its default)."""
    from weft.transport.connection import connect
    from weft.workers.search_attributes import ensure_search_attributes

    dev = ephemeral_dev_server()
    await dev.start()
    try:
        client = await connect(dev.address)
        await ensure_search_attributes(client, "default")
        scripted_server = (
            ScriptedModelServer()
            if max_records is None
            else ScriptedModelServer(max_records=max_records)
        )
        async with scripted_server as scripted:
            yield client, scripted, dev.address
    finally:
        await dev.stop()


def scratch_config(tmp: str | Path, *, store_url: str | None = None) -> WeftConfig:
    """A WeftConfig for a throwaway worker: a SQLite store under `tmp` (or `store_url`) and
    the scripted provider; definitions come from Python."""
    from pathlib import Path

    from weft.workers.config import ProviderConfig, StoreConfig, WeftConfig

    tmp = Path(tmp)
    return WeftConfig(
        store=StoreConfig(url=store_url or f"sqlite:///{tmp / 'weft.db'}"),
        definitions=str(tmp / "no-definitions"),
        providers={"scripted": ProviderConfig(kind="scripted")},
        root=tmp,
    )


def agent_definitions(
    script: str,
    *,
    agent: str = "helper",
    tools: Sequence[str | dict[str, Any]] | None = None,
    side: dict[str, Any] | None = None,
    **agent_fields: Any,
) -> Definitions:
    """An ai_human agent on the scripted model `script` with the test tools (names, or
    entries in object form such as `{"mcp": "tools"}`)."""
    tools = ["weather", "note", "explode"] if tools is None else list(tools)
    return Definitions().add(
        define_model(
            name="scripted", provider="scripted", model=script, inputPrice=1.0, outputPrice=2.0
        ),
        define_prompt(
            name="helper_prompt",
            toolDescription="helps",
            model="scripted",
            prompt="You are a helpful agent.",
            tools=tools,
        ),
        define_agent(name=agent, sideA={"prompt": "helper_prompt", **(side or {})}, **agent_fields),
        define_tool(
            name="weather", description="Weather for a city", args=CityArgs, execute=weather
        ),
        define_tool(name="note", description="Remember a note", args=NoteArgs, execute=note),
        define_tool(name="explode", description="Always fails", args=NoteArgs, execute=explode),
    )


def add_script(server: ScriptedModelServer, script: dict[str, Any]) -> str:
    """Register `script` under a fresh name and return it (the provider model name)."""
    name = f"script-{uuid.uuid4().hex[:10]}"
    server.set_script(name, script)
    return name


async def start_thread(
    client: Client,
    task_queue: str,
    agent: str = "helper",
    messages: list[dict[str, Any]] | None = None,
    **fields: Any,
) -> WorkflowHandle[Any, Any]:
    """Start an AgentThread with plain JSON input, as any service would."""
    thread_id = f"thread-{uuid.uuid4().hex[:12]}"
    return await client.start_workflow(
        WORKFLOW_TYPE,
        {"agent": agent, "messages": messages or [], **fields},
        id=thread_id,
        task_queue=task_queue,
    )


async def read(handle: WorkflowHandle[Any, Any]) -> ThreadRead:
    """The thread read model."""
    thread_read: ThreadRead = await handle.query(QUERY_THREAD_READ, result_type=ThreadRead)
    return thread_read


async def wait_until(
    handle: WorkflowHandle[Any, Any],
    predicate: Callable[[ThreadRead], bool],
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
) -> ThreadRead:
    """Poll `thread_read` every `interval` s until `predicate` holds, or fail naming the
    last state. Each poll is a query the worker answers, so load tests poll slowly."""
    deadline = asyncio.get_running_loop().time() + timeout
    state = await read(handle)
    while not predicate(state):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last state: {state}")
        await asyncio.sleep(interval)
        state = await read(handle)
    return state


def idle_after(turns: int) -> Callable[[ThreadRead], bool]:
    """A predicate: the thread is waiting for input with `turns` completed or failed turns."""
    return lambda s: s.status == "waiting_input" and not s.queue and s.counters.turns >= turns


async def temporal_cli(address: str, *args: str) -> tuple[int, str, str]:
    """Run the real `temporal` CLI against the dev server; returns (code, stdout, stderr)."""
    from weft.workers.dev_server import find_temporal_binary

    process = await asyncio.create_subprocess_exec(
        find_temporal_binary(),
        *args,
        "--address",
        address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


class CodeArgs(BaseModel):
    """Arguments of the code tool."""

    source: str


async def run_js(state: Any, args: CodeArgs) -> Any:
    """Runs model-written code in the runCode sandbox and returns its result."""
    result = await state.run_code(args.source, {"language": "javascript"})
    return result.model_dump(by_alias=True, exclude_none=True)


async def run_histories(
    client: Client, workflow_id: str, first_run_id: str | None
) -> list[WorkflowHistory]:
    """The history of every run of a workflow, following its continue-as-new chain from
    `first_run_id` (a started handle's `first_execution_run_id`)."""
    from temporalio.api.enums.v1 import EventType

    assert first_run_id is not None, f"{workflow_id}: no first run id to follow the runs from"
    histories = []
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        continued = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.event_type == continued
            else None
        )
    return histories


def patch_markers(history: Any) -> list[tuple[int, str]]:
    """(event id, patch id) of every `workflow.patched` marker in a run's history."""
    found = []
    for event in history.events:
        attributes = event.marker_recorded_event_attributes
        if attributes.marker_name == "core_patch":
            data = json.loads(attributes.details["patch-data"].payloads[0].data)
            found.append((event.event_id, data["id"]))
    return found


async def assert_every_run_replays(client: Client, handle: WorkflowHandle[Any, Any]) -> None:
    """Every run of the thread replays on today's workflow code without non-determinism."""
    histories = await run_histories(client, handle.id, handle.first_execution_run_id or "")
    await assert_runs_replay(histories)


def ran_workflow_code(history: WorkflowHistory) -> bool:
    """Whether a run has started a workflow task, so workflow code ran in it."""
    from temporalio.api.enums.v1 import EventType

    started = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
    return any(event.event_type == started for event in history.events)


async def assert_runs_replay(histories: Sequence[WorkflowHistory]) -> int:
    """Each run that ran workflow code replays without non-determinism; returns how many.

    A run continued a moment ago may hold its start event alone: the server holds a
    continued run's first workflow task back until a second after the previous run began
    (`ContinueAsNewMinInterval`). No code ran in it, so there is nothing to check, and
    `Replayer.replay_workflow` never returns on such a history (nor once cancelled). A live
    worker never meets one: a workflow task reaches a worker only once it has started.
    """
    from temporalio.worker import Replayer

    from weft.transport.codec import data_converter
    from weft.workers.workflow_runner import workflow_runner
    from weft.workflows.agent_thread import AgentThreadWorkflow

    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[AgentThreadWorkflow],
        data_converter=data_converter(None),
        workflow_runner=workflow_runner(data_converter(None)),
    )
    replayed = 0
    for run, history in enumerate(histories, start=1):
        if not ran_workflow_code(history):
            continue
        replayed += 1
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            # Keep the history: a replay failure is a determinism bug to study, not retry.
            kept = (
                Path(tempfile.gettempdir())
                / f"weft-replay-failure-{history.workflow_id}-run{run}.json"
            )
            kept.write_text(history.to_json())
            raise AssertionError(f"{result.replay_failure}; history kept at {kept}")
    return replayed


# The Agent Runtime schemas are vendored (see its README) so the repo tests on its own.
SPECS = Path(__file__).resolve().parent / "specs" / "agentruntime"
EVENT_SCHEMA = SPECS / "agentruntime-event.schema.json"


def event_schema_validator() -> jsonschema.Draft202012Validator:
    """A validator for agentruntime-event.schema.json (vendored), checking formats too."""
    import json

    import jsonschema
    import pytest

    if not EVENT_SCHEMA.exists():
        pytest.fail(f"the event schema is missing at {EVENT_SCHEMA}")
    return jsonschema.Draft202012Validator(
        json.loads(EVENT_SCHEMA.read_text()),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


def json_texts(node: Any) -> list[str]:
    """Every string in a JSON document, plus the base64-decoded form of each one."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found += [str(key), *json_texts(value)]
    elif isinstance(node, list):
        for value in node:
            found += json_texts(value)
    elif isinstance(node, str):
        found.append(node)
        try:
            found.append(base64.b64decode(node, validate=True).decode("utf-8", "replace"))
        except ValueError:
            pass
    return found


def assert_preview_of(sent: str, content: str) -> None:
    """The model got `content` as a preview: its head, then the notice naming the stored
    output and the offset `read_output` reads on from (docs/context.md)."""
    head, notice, rest = sent.partition("\n…[weft: this output has ")
    assert notice, f"the model got no preview: {sent[-300:]!r}"
    assert len(head) > 1_000 and content.startswith(head)
    assert rest.startswith(f"{len(content)} characters") and "call read_output with" in rest


async def weft_cli(config: Path, *args: str) -> tuple[int, str, str]:
    """Run the venv's `weft --config CONFIG ARGS…` as a user would; (exit code, out, err)."""
    import sys

    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


class WaitArgs(BaseModel):
    """Arguments of the `wait_for_cancel` tool: where to say it was cancelled."""

    note: str


async def wait_for_cancel(state: Any, args: WaitArgs) -> str:
    """A tool that waits (up to a minute) until its activity is cancelled, and then writes
    "cancelled" to `args.note`: the proof that a cancel reached the tool."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        Path(args.note).write_text("cancelled")
        raise
    return "waited a minute"


def store_of(worker: AgentWorker) -> Store:
    """The store of a started worker (it opens its store on entry)."""
    assert worker.store is not None, "the worker is not started: it has no store yet"
    return worker.store


def sequence_of(event: Event) -> int:
    """The sequence of a stored event (the store numbers events as it writes them)."""
    assert event.sequence is not None, f"{event.type} {event.event_id} was never stored"
    return event.sequence


def tool_calls_of(message: Message) -> list[ToolCall]:
    """The tool calls of an assistant message that made some."""
    assert message.tool_calls, f"message {message.id} made no tool calls"
    return message.tool_calls


def content_of(message: Message) -> str:
    """The text of a message that has some."""
    assert message.content is not None, f"message {message.id} has no content"
    return message.content


def stored_events(worker: AgentWorker, thread_id: str, *types: str) -> list[Event]:
    """The thread's stored events (of `types`, when given), in order."""
    return store_of(worker).events.read(thread_id, limit=10_000, types=list(types) or None)


async def until(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll `check()` until it is truthy (and return it), or fail naming `what`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (found := check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)
    return found


def assert_terminated_through_temporal(record: Any, why: str) -> None:
    """`record` (a task's or a job's) ended `failed` with Temporal's reason for a terminate
    that gave `why`, as the reader that saw the closed run recorded it."""
    assert record.status == "failed", record
    assert record.reason is not None
    assert record.reason.startswith("its run was terminated through Temporal by ")
    assert record.reason.endswith(f": {why}")
