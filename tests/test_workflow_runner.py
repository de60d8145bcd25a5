"""weft's workflow runner (workers/workflow_runner.py): weft's workflows run outside the
SDK's sandbox and write byte for byte what the sandbox wrote; its instances share one
payload converter, only for a data converter that takes no context."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from runner_probe import ProbeWorkflow, echo
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.worker import (
    Replayer,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from weft.activities.crypto import new_key, parse_keys
from weft.transport.codec import data_converter
from weft.workers.workflow_runner import SharedConverterRunner, workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow


class ContextCodec(PayloadCodec, WithSerializationContext):
    """A codec that takes a context, as a user's per-workflow key codec would."""

    def __init__(self, context: SerializationContext | None = None) -> None:
        self.context = context

    def with_context(self, context: SerializationContext) -> ContextCodec:
        return ContextCodec(context)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


def test_one_converter_is_shared_only_when_no_context_can_change_a_byte():
    """weft's converters (with and without keys) share one; a codec that takes a context
    gets the SDK's own unsandboxed runner, a converter per instance."""
    keyring = parse_keys([f"k1:{new_key()}"], source="test")
    assert isinstance(workflow_runner(pydantic_data_converter), SharedConverterRunner)
    assert isinstance(workflow_runner(data_converter(keyring)), SharedConverterRunner)
    takes_context = dataclasses.replace(pydantic_data_converter, payload_codec=ContextCodec())
    runner = workflow_runner(takes_context)
    assert type(runner) is UnsandboxedWorkflowRunner


async def _run_probe(client: Client, runner: WorkflowRunner) -> tuple[Any, list[bytes]]:
    queue = f"workflow-runner-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ProbeWorkflow],
        activities=[echo],
        workflow_runner=runner,
    ):
        handle = await client.start_workflow(
            ProbeWorkflow.run, "hello", id=f"probe-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        result = await handle.result()
    history = await handle.fetch_history()
    payloads = []
    for event in history.events:
        scheduled = event.activity_task_scheduled_event_attributes
        completed = event.activity_task_completed_event_attributes
        payloads += [p.SerializeToString() for p in scheduled.input.payloads]
        payloads += [_summary(event)]
        payloads += [p.SerializeToString() for p in completed.result.payloads]
    return result, [p for p in payloads if p]


def _summary(event: Any) -> bytes:
    summary = event.user_metadata.summary
    return summary.SerializeToString() if summary.data else b""


async def test_it_runs_outside_the_sandbox_and_writes_what_the_sandbox_writes(
    temporal_client: Client,
) -> None:
    """The same workflow on the SDK's sandbox (weft's runner before) and on weft's runner:
    every activity input, summary and result is byte for byte the same, and only the
    sandbox's run was in the sandbox."""
    converter = temporal_client.data_converter
    passthrough = SandboxRestrictions.default.with_passthrough_modules(
        "weft.contract", "weft.workflows", "pydantic", "pydantic_core"
    )
    sandboxed, sandboxed_payloads = await _run_probe(
        temporal_client, SandboxedWorkflowRunner(restrictions=passthrough)
    )
    ours, ours_payloads = await _run_probe(temporal_client, workflow_runner(converter))

    replies = [{"echo": f"hello-{i}", "length": 7} for i in range(3)]
    assert sandboxed == {"replies": replies, "sandboxed": True}
    assert ours == {"replies": replies, "sandboxed": False}
    assert len(ours_payloads) == 3 + 3 + 3
    assert ours_payloads == sandboxed_payloads


async def test_its_instances_share_one_payload_converter(monkeypatch: Any) -> None:
    """Each replay of an evicted thread is a new instance; with one converter per runner it
    keeps the pydantic type adapters the previous instances built instead of building
    them again (bench/bench_replay.py)."""
    converters: list[object] = []
    stock_create = UnsandboxedWorkflowRunner.create_instance

    def create_instance(self: UnsandboxedWorkflowRunner, det: WorkflowInstanceDetails) -> Any:
        converters.append(det.payload_converter_factory())
        return stock_create(self, det)

    monkeypatch.setattr(UnsandboxedWorkflowRunner, "create_instance", create_instance)
    path = Path(__file__).parent / "histories" / "truthful_log.json"
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        workflows=[AgentThreadWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(pydantic_data_converter),
    )

    async def twice() -> AsyncIterator[WorkflowHistory]:
        for _ in range(2):
            yield history

    # One replayer worker, as one worker replays every evicted thread it is given.
    await replayer.replay_workflows(twice())
    assert len(converters) == 2
    assert all(converter is converters[0] for converter in converters)
    # The converter is still the worker's: the pydantic one, with the SDK's wrapper.
    assert type(converters[0]) is type(pydantic_data_converter._new_payload_converter())
