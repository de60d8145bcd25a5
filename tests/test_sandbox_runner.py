"""weft's sandbox runner answers the converter's context questions outside the sandbox,
writes exactly what the stock sandbox writes, and is used only where that is safe."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from sandbox_probe import ProbeWorkflow, echo
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.worker.workflow_sandbox import _runner as sandbox_internals

from weft.activities.crypto import new_key, parse_keys
from weft.transport.codec import data_converter
from weft.workers.sandbox_runner import ContextFreeSandboxRunner, workflow_runner


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
