"""Task and job inputs stay readable by the previous release's workers (a rolling deploy).

Each release validates the task models it receives with `extra="forbid"`, so a worker of
the release before `runIn` refuses an input naming `runIn`, even as `null`. A field added
since is left out of the JSON while unused (`Field(exclude_if=unused)`, contract/tasks.py):
a task that does not run in a thread reaches such a worker exactly as that release wrote
it. The `_Old*` models below are that release's shapes (contract/tasks.py and
contract/jobs.py at the commit before `runIn`), strict as it was: a field added to these
models without `exclude_if` fails these tests. Today's models still read inputs with the
field, and the inputs that release wrote.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from support import StartWorker, add_script, agent_definitions, store_of, until
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from weft.client.tasks import Tasks
from weft.contract.budget import Budget
from weft.contract.jobs import Claim, ClaimedItem
from weft.contract.tasks import (
    TaskAttempt,
    TaskCommand,
    TaskOutput,
    TaskProgress,
    TaskRecord,
    TaskRunCarry,
    TaskRunIn,
    TaskRunInput,
    TaskSpec,
)
from weft.transport.codec import data_converter
from weft.workers.scripted_model import ScriptedModelServer

PREVIOUS_RELEASE_INPUT = (
    Path(__file__).parent / "histories" / "tasks" / "task_continue_as_new_run2.json"
)


class _Old(BaseModel):
    """The previous release's `CamelModel`: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )


class _OldScope(_Old):
    session_id: str | None = None
    thread_id: str | None = None
    parent_task_id: str | None = None
    tenant: str | None = None


class _OldConstraints(_Old):
    max_attempts: int = 1
    deadline_seconds: float | None = None
    budget: Budget | None = None
    lost_after_seconds: float = 30


class _OldAcceptance(_Old):
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class _OldOutput(_Old):
    thread_id: str | None = None
    message_id: str | None = None
    response: str | None = None
    structured: Any = None


class _OldAttempt(_Old):
    attempt_id: str
    number: int
    run_id: str
    thread_id: str
    status: Literal["running", "completed", "failed", "cancelled", "timed_out", "lost"] = "running"
    started_at: str
    ended_at: str | None = None
    turn_id: str | None = None
    output: _OldOutput | None = None
    error: str | None = None


class _OldProgress(_Old):
    message: str
    data: dict[str, Any] | None = None
    at: str | None = None


class _OldDelivery(_Old):
    state: Literal["pending", "stored", "none"] = "pending"
    output_ref: str | None = None


class _OldRecord(_Old):
    """`TaskRecord` before `runIn`: the spec's fields, then the lifecycle's."""

    objective: str
    assignee: str
    scope: _OldScope = Field(default_factory=_OldScope)
    constraints: _OldConstraints = Field(default_factory=_OldConstraints)
    acceptance: _OldAcceptance = Field(default_factory=_OldAcceptance)
    dependencies: list[str] = Field(default_factory=list)
    auto_start: bool = True
    task_id: str
    status: str = "accepted"
    created_at: str
    updated_at: str
    attempts: list[_OldAttempt] = Field(default_factory=list)
    progress: list[_OldProgress] = Field(default_factory=list)
    output: _OldOutput | None = None
    delivery: _OldDelivery = Field(default_factory=_OldDelivery)
    blocked_by: list[str] = Field(default_factory=list)
    reason: str | None = None
    ended_by: str | None = None
    delegated_to: str | None = None


class _OldCommand(_Old):
    by: str | None = None
    reason: str | None = None


class _OldCarry(_Old):
    stage: Literal["waiting", "queued", "attempting"]
    began: str
    made: int = 0
    retry_due: bool = False
    start: _OldCommand | None = None
    paused_from: str | None = None


class _OldRunInput(_Old):
    """`TaskRunInput` before `runIn`: the `TaskRun` workflow's start input."""

    task: _OldRecord
    retry_reason: str | None = None
    carried: _OldCarry | None = None
    continue_after_events: int = 10_000


class _OldClaimedItem(_Old):
    item_id: str
    index: int
    task_id: str
    launch: int
    start: _OldRunInput | None = None
    settled: dict[str, Any] | None = None


class _OldClaim(_Old):
    """`job.claim`'s answer before `runIn`, as the `JobRun` workflow reads it."""

    items: list[_OldClaimedItem] = Field(default_factory=list)
    cursor: int


def _record(**fields: Any) -> TaskRecord:
    """A task as `create` makes it: a spec without `runIn`, and its lifecycle."""
    spec = TaskSpec.model_validate({"objective": "Answer.", "assignee": "helper", **fields})
    at = "2026-11-27T12:00:00.000Z"
    lifecycle = {"taskId": "task-0123456789ab", "createdAt": at, "updatedAt": at}
    return TaskRecord.model_validate({**spec.model_dump(mode="json"), **lifecycle})


def _worked(record: TaskRecord) -> TaskRecord:
    """`record` with an attempt that ended with an output, and progress: every nested part."""
    attempt = TaskAttempt(
        attempt_id=f"{record.task_id}.a1",
        number=1,
        run_id="run-1",
        thread_id=f"{record.task_id}-a1",
        status="failed",
        started_at=record.created_at,
        ended_at=record.created_at,
        output=TaskOutput(thread_id=f"{record.task_id}-a1", response="no"),
        error="not accepted",
    )
    progress = TaskProgress(message="halfway")
    return record.model_copy(update={"attempts": [attempt], "progress": [progress]})


def _sent(value: Any) -> list[Payload]:
    """`value` as weft's data converter puts it in Temporal history."""
    return data_converter(None).payload_converter.to_payloads([value])


def _received(payloads: list[Payload], model: type[BaseModel]) -> Any:
    """`payloads` as a worker decodes them into `model` (its activity's or workflow's hint)."""
    return data_converter(None).payload_converter.from_payloads(payloads, [model])[0]


def test_the_old_model_refuses_a_run_in_even_as_null() -> None:
    """The copied shape is as strict as that release was: the explicit null today's models
    wrote before `runIn` was left out unused is refused, naming the field."""
    written = TaskRunInput(task=_record()).model_dump(mode="json")
    written["task"]["runIn"] = None
    with pytest.raises(ValidationError, match="runIn") as refused:
        _OldRunInput.model_validate(written)
    assert refused.value.errors()[0]["type"] == "extra_forbidden"


def test_a_task_without_run_in_reaches_an_old_worker_as_it_wrote_it() -> None:
    """Today's start input of a task without `runIn` (as the client dumps it, and as the
    converter writes a model), a retry's, and a continued run's carry, each decoded by the
    previous release's strict models: accepted, every value the same."""
    record = _worked(_record(scope={"sessionId": "s-1"}, constraints={"maxAttempts": 2}))
    inputs = [
        TaskRunInput(task=_record()),
        TaskRunInput(task=record, retry_reason="retried"),
        TaskRunInput(
            task=record,
            carried=TaskRunCarry(
                stage="attempting", began=record.created_at, made=1, start=TaskCommand(by="ops")
            ),
            continue_after_events=40,
        ),
    ]
    for start in inputs:
        dumped = start.model_dump(mode="json")
        assert "runIn" not in dumped["task"], dumped
        for payloads in (_sent(dumped), _sent(start)):
            old = _received(payloads, _OldRunInput)
            assert TaskRunInput.model_validate(old.model_dump(mode="json")) == start


def test_a_job_claim_reaches_an_old_job_run() -> None:
    """`job.claim`'s answer, its items' start inputs inside, read by the previous
    release's `JobRun` (the activity result's type hint)."""
    start = TaskRunInput(task=_record(scope={"tenant": "acme"}))
    claim = Claim(
        items=[
            ClaimedItem(
                item_id="job-0.i0", index=0, task_id=start.task.task_id, launch=1, start=start
            ),
            ClaimedItem(
                item_id="job-0.i1",
                index=1,
                task_id="task-ba9876543210",
                launch=1,
                settled={"status": "completed"},
            ),
        ],
        cursor=2,
    )
    old = _received(_sent(claim), _OldClaim)
    assert old.items[0].start.task.scope.tenant == "acme"
    assert old.items[1].start is None and old.items[1].settled == {"status": "completed"}


def test_todays_models_read_run_in_and_the_previous_releases_inputs() -> None:
    """A task run in a thread keeps `runIn` across the wire; an input the previous
    release wrote (a `TaskRun` start input from a committed history) decodes, and today's
    converter writes it back byte for byte."""
    given = TaskRunInput(task=_record(runIn={"threadId": "thread-1"}))
    assert given.model_dump(mode="json")["task"]["runIn"] == {"threadId": "thread-1"}
    back = _received(_sent(given), TaskRunInput)
    assert back.task.run_in == TaskRunIn(thread_id="thread-1") and back == given
    with pytest.raises(ValidationError, match="runIn"):
        _received(_sent(given), _OldRunInput)  # an old worker cannot run it: the patch's

    history = json.loads(PREVIOUS_RELEASE_INPUT.read_text())
    payloads = history["events"][0]["workflowExecutionStartedEventAttributes"]["input"]
    written = Payload(
        metadata={"encoding": b"json/plain"}, data=base64.b64decode(payloads["payloads"][0]["data"])
    )
    assert b'"delegatedTo":null' in written.data and b'"tenant":null' in written.data
    read = _received([written], TaskRunInput)
    assert read.task.run_in is None and read.carried is not None
    assert read.carried.stage == "waiting"
    assert _sent(read)[0].data == written.data
    assert _sent(read.model_dump(mode="json"))[0].data == written.data


def test_the_json_schema_still_names_run_in() -> None:
    """Left out unused, `runIn` is still in the serialization schema (the HTTP API's
    OpenAPI), not required."""
    task = TaskRecord.model_json_schema(mode="serialization")
    assert {"runIn", "delegatedTo", "scope", "attempts"} <= set(task["properties"])
    assert "runIn" not in task.get("required", [])


async def test_an_old_worker_reads_the_inputs_todays_client_starts_tasks_with(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """On the dev server: the start input today's `Tasks.create` puts in a `TaskRun`'s
    history, and a retry's, decode with the previous release's strict model; so does the
    task in the stored `task.created` (an old worker folds the log too)."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))
    tasks = Tasks(temporal_client, store_of(worker), task_queue=worker.task_queue)
    created = await tasks.create("Hold on.", "helper", auto_start=False)

    await tasks.cancel(created.task_id, "first run over")
    ended = await asyncio.wait_for(tasks.wait(created.task_id), timeout=60)
    assert ended.status == "cancelled"
    await tasks.retry(created.task_id, "once more")
    await until(lambda: not tasks.get(created.task_id).terminal, "the retried run began")
    await tasks.cancel(created.task_id, "second run over")
    await asyncio.wait_for(tasks.wait(created.task_id), timeout=60)

    starts: list[_OldRunInput] = []
    async for run in temporal_client.list_workflows(f"WorkflowId = '{created.task_id}'"):
        handle = temporal_client.get_workflow_handle(created.task_id, run_id=run.run_id)
        first = (await handle.fetch_history()).events[0]
        payloads = first.workflow_execution_started_event_attributes.input.payloads
        (start,) = await temporal_client.data_converter.decode(list(payloads), [_OldRunInput])
        starts.append(start)
    assert sorted(s.retry_reason or "" for s in starts) == ["", "once more"]
    assert {s.task.task_id for s in starts} == {created.task_id}

    logged = tasks.events(created.task_id)[0]
    assert logged.type == "task.created"
    old = _OldRecord.model_validate(logged.payload["task"])
    assert old.task_id == created.task_id and not old.auto_start
