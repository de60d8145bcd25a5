"""weft's sandbox runner answers the converter's context questions outside the sandbox,
writes exactly what the stock sandbox writes, and is used only where that is safe."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sandbox_probe import ProbeWorkflow, echo
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.worker import Replayer, Worker, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import _runner as sandbox_internals

from weft.activities.crypto import new_key, parse_keys
from weft.transport.codec import data_converter
from weft.workers.sandbox_runner import ContextFreeSandboxRunner, workflow_runner
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


def test_the_context_free_runner_only_for_converters_that_take_no_context():
    """Skipping the sandbox's answer is safe only when no answer can change a byte."""
    keyring = parse_keys([f"k1:{new_key()}"], source="test")
    assert isinstance(workflow_runner(pydantic_data_converter), ContextFreeSandboxRunner)
    assert isinstance(workflow_runner(data_converter(keyring)), ContextFreeSandboxRunner)
    takes_context = dataclasses.replace(pydantic_data_converter, payload_codec=ContextCodec())
    runner = workflow_runner(takes_context)
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert not isinstance(runner, ContextFreeSandboxRunner)


async def _run_probe(client: Client, runner: SandboxedWorkflowRunner) -> tuple[Any, list[bytes]]:
    queue = f"sandbox-runner-{uuid.uuid4().hex[:8]}"
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
        payloads += [scheduled_summary(event)]
        payloads += [p.SerializeToString() for p in completed.result.payloads]
    completed_run = history.events[-1].workflow_execution_completed_event_attributes
    payloads += [p.SerializeToString() for p in completed_run.result.payloads]
    return result, [p for p in payloads if p]


def scheduled_summary(event: Any) -> bytes:
    summary = event.user_metadata.summary
    return summary.SerializeToString() if summary.data else b""


def _sandboxed_runner(converter: DataConverter) -> SandboxedWorkflowRunner:
    """weft's workflow runner, which is a sandbox (with or without serialization context)."""
    runner = workflow_runner(converter)
    assert isinstance(runner, SandboxedWorkflowRunner)
    return runner


async def test_it_writes_what_the_stock_sandbox_writes_without_entering_it(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every payload the workflow writes (activity inputs and summaries, its result) is
    byte for byte the stock sandbox's, and the sandbox is never asked for a context."""
    asked: list[object] = []
    ask_sandbox = sandbox_internals._Instance.get_serialization_context

    def counting(self: Any, command_info: Any) -> Any:
        asked.append(command_info)
        return ask_sandbox(self, command_info)

    monkeypatch.setattr(sandbox_internals._Instance, "get_serialization_context", counting)
    converter = temporal_client.data_converter

    stock_result, stock_payloads = await _run_probe(
        temporal_client,
        SandboxedWorkflowRunner(restrictions=_sandboxed_runner(converter).restrictions),
    )
    stock_questions = len(asked)
    asked.clear()
    ours_result, ours_payloads = await _run_probe(temporal_client, _sandboxed_runner(converter))

    assert stock_questions > 0, "the stock sandbox was never asked: the probe measures nothing"
    assert asked == []
    assert ours_result == stock_result == [{"echo": f"hello-{i}", "length": 7} for i in range(3)]
    assert len(ours_payloads) == 3 + 3 + 3 + 1
    assert ours_payloads == stock_payloads


async def test_its_instances_share_one_payload_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each replay of an evicted thread is a new instance; with one converter per runner it
    keeps the pydantic type adapters the previous instances built instead of building
    them again (bench/bench_replay.py)."""
    converters: list[object] = []
    stock_create = SandboxedWorkflowRunner.create_instance

    def create_instance(self: SandboxedWorkflowRunner, det: WorkflowInstanceDetails) -> Any:
        if det.info.workflow_id == history.workflow_id:  # not `prepare_workflow`'s probe
            converters.append(det.payload_converter_factory())
        return stock_create(self, det)

    monkeypatch.setattr(SandboxedWorkflowRunner, "create_instance", create_instance)
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
