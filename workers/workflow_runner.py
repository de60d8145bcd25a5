"""How weft's worker runs its workflows: outside the SDK's sandbox, with one payload
converter per worker, telling the per-thread caches of each eviction.

**Why no sandbox.** The SDK's sandbox re-imports, for each workflow instance, every module
it does not pass through, and refuses non-deterministic calls (clocks, randomness, I/O)
made by the modules it imported itself. weft passed its own modules through it
(`weft.workflows`, `weft.contract`, pydantic): re-importing them cost about 70 ms of worker
CPU per thread started or replayed. A module passed through is the host's own import, and
the sandbox's refusals reach only code the sandbox imported, so for weft's workflows it
checked nothing, while every activation still paid its import hooks, its globals and its
`exec`s: about 2 ms of worker CPU a step, a tenth of a loaded worker's (docs/performance.md).
What it would check is checked statically instead (tests/test_workflow_imports.py): under
`workflows/` only stdlib-pure modules, temporalio's workflow side, pydantic and `contract`
are imported (ruff bans the rest, ARCHITECTURE "Determinism"), no clock is read but
`workflow.now()`, and no module keeps mutable state that one instance could leave behind for
the next. The committed histories replay (tests/test_replay*.py). The worker registers
weft's workflows only; a workflow of a user's own would run in the sandbox of a worker of
its own.

**One payload converter per worker.** The SDK builds a payload converter for every
instance, and the pydantic converter caches a `TypeAdapter` per type inside it: each replay
of an evicted thread built its adapters again (3 for a thread of three turns, about 0.2 ms
of its ~20 ms of CPU; bench/bench_replay.py). Sharing one is safe for a converter that
takes no serialization context and stores nothing externally (weft's: transport/codec.py,
the pydantic one or its subclass that marks env payloads): it holds nothing but that cache,
which is thread-safe and a pure function of the type, and with no context it never differs
between instances. Another converter gets one per instance, as the SDK makes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import (
    DataConverter,
    PayloadConverter,
    SerializationContext,
    StorageDriverStoreContext,
    WorkflowSerializationContext,
)
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)

# Only its identity is compared: `with_context` returns the converter itself when nothing
# in it takes a context, whatever the context is.
_PROBE = WorkflowSerializationContext(namespace="weft-probe", workflow_id="weft-probe")


def workflow_runner(data_converter: DataConverter) -> WorkflowRunner:
    """The runner for weft's workflows with `data_converter`: unsandboxed, sharing one
    payload converter between its instances when the converter takes no context."""
    if takes_no_context(data_converter):
        return SharedConverterRunner()
    return UnsandboxedWorkflowRunner()


def takes_no_context(data_converter: DataConverter) -> bool:
    """Whether no serialization context or storage target can change what it writes."""
    return (
        data_converter.external_storage is None
        and data_converter.with_context(_PROBE) is data_converter
    )


class SharedConverterRunner(UnsandboxedWorkflowRunner):
    """The SDK's unsandboxed runner whose instances share one payload converter (for a
    data converter that takes no context: `takes_no_context`)."""

    def __init__(self) -> None:
        super().__init__()
        self._shared_converters: dict[Callable[[], PayloadConverter], PayloadConverter] = {}

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        shared = self._shared_converter(det.payload_converter_factory)
        return super().create_instance(
            dataclasses.replace(det, payload_converter_factory=lambda: shared)
        )

    def _shared_converter(self, factory: Callable[[], PayloadConverter]) -> PayloadConverter:
        # Keyed by the factory (the worker's data converter's bound method): one worker's
        # runner could in principle serve workers with different converters.
        converter = self._shared_converters.get(factory)
        if converter is None:
            converter = self._shared_converters.setdefault(factory, factory())
        return converter


@dataclass(frozen=True)
class EvictionNotices(WorkflowRunner):
    """`runner`, telling `evicted(workflow_id)` after each run the SDK evicts from the
    workflow cache (a full cache, a finished run, a failed task): the worker's per-thread
    caches forget the thread with it (store/thread_cache_budget.py). Commands are
    untouched: the eviction's activation goes to the instance as before."""

    runner: WorkflowRunner
    evicted: Callable[[str], None]

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _NoticedEviction(self.runner.create_instance(det), self.evicted)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        self.runner.set_worker_level_failure_exception_types(types)


class ForwardingInstance(WorkflowInstance):
    """A workflow instance that hands everything to `instance`: the base of a wrapper that
    watches activations (`_NoticedEviction`, bench/bench_replay.py's timer)."""

    def __init__(self, instance: WorkflowInstance) -> None:
        self._instance = instance

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self._instance.activate(act)

    # `command_info` is the SDK's private `CommandInfo`: passed through, never read.
    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        return self._instance.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        return self._instance.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self._instance.get_info()

    def get_thread_id(self) -> int | None:
        return self._instance.get_thread_id()


class _NoticedEviction(ForwardingInstance):
    """An instance that reports its eviction once the instance has processed it."""

    def __init__(self, instance: WorkflowInstance, evicted: Callable[[str], None]) -> None:
        super().__init__(instance)
        self._evicted = evicted

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._instance.activate(act)
        if any(job.HasField("remove_from_cache") for job in act.jobs):
            self._evicted(self._instance.get_info().workflow_id)
        return completion
