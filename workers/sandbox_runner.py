"""The workflow sandbox weft runs threads in, and what it answers outside the sandbox.

For every payload sequence of an activation and of its completion, the SDK asks the
workflow instance which serialization context the payload's command belongs to, and which
external-storage target: three questions for each sequence of an activation, four for each
of a completion. In the sandbox every question is an `exec` inside it with its import hooks
applied, and under load these questions were the largest part of the SDK's workflow-task
CPU in a weft worker (more payloads per task than a bare workflow: the activity summaries
the Temporal UI shows, among others).

The answers matter only to a data converter that takes a context or stores payloads
externally. weft's converters do neither, and the SDK's own test says so:
`DataConverter.with_context` returns the converter itself when no part of it takes a
context. For such a converter the answer cannot change a byte, so the runner answers "no
context" without entering the sandbox. With any other converter it is the stock sandbox.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import (
    DataConverter,
    PayloadConverter,
    SerializationContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

# Only its identity is compared: `with_context` returns the converter itself when nothing
# in it takes a context, whatever the context is.
_PROBE = WorkflowSerializationContext(namespace="weft-probe", workflow_id="weft-probe")


def workflow_runner(data_converter: DataConverter) -> WorkflowRunner:
    """The sandbox, passing through modules that are pure and slow to re-import per run.

    The sandbox re-executes every module it does not pass through for each new workflow
    instance: weft's 40 workflow modules cost about 70 ms of worker CPU per thread started
    or re-cached, the largest single cost of a worker under many threads.
    """
    # - contract is pure data (pydantic models); pydantic itself is deterministic.
    # - workflows/ is weft's own deterministic code. What the sandbox would catch at run
    #   time is guarded statically instead (tests/test_workflow_imports.py): it imports only
    #   stdlib-pure modules, temporalio's workflow side, pydantic and contract; it never
    #   reads clocks or randomness except through `workflow.*`; and it keeps no
    #   module-level mutable state, so sharing one import between instances leaks nothing.
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "weft.contract", "weft.workflows", "pydantic", "pydantic_core"
    )
    if takes_no_context(data_converter):
        return ContextFreeSandboxRunner(restrictions=restrictions)
    return SandboxedWorkflowRunner(restrictions=restrictions)


def takes_no_context(data_converter: DataConverter) -> bool:
    """Whether no serialization context or storage target can change what it writes."""
    return (
        data_converter.external_storage is None
        and data_converter.with_context(_PROBE) is data_converter
    )


@dataclass(frozen=True)
class ContextFreeSandboxRunner(SandboxedWorkflowRunner):
    """The stock sandbox, for a data converter that takes no context (`takes_no_context`),
    whose instances share one payload converter.

    The SDK builds a payload converter for every instance, and the pydantic converter
    caches a `TypeAdapter` per type inside it: each replay of an evicted thread built its
    adapters again (3 for a thread of three turns, about 0.2 ms of its ~20 ms of CPU;
    bench/bench_replay.py). One converter per worker keeps them. Sharing it is safe for
    weft's converters (transport/codec.py: the pydantic one, or its subclass that marks
    env payloads): they hold nothing but that cache, which is thread-safe and a pure
    function of the type (the types are the passed-through modules' own, the same objects
    in every instance), and with no context a converter never differs between instances.
    """

    _shared_converters: dict[Callable[[], PayloadConverter], PayloadConverter] = field(
        default_factory=dict, compare=False, repr=False
    )

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        shared = self._shared_converter(det.payload_converter_factory)
        det = dataclasses.replace(det, payload_converter_factory=lambda: shared)
        return _ContextOutsideSandbox(super().create_instance(det))

    def _shared_converter(self, factory: Callable[[], PayloadConverter]) -> PayloadConverter:
        # Keyed by the factory (the worker's data converter's bound method): one worker's
        # runner could in principle serve workers with different converters.
        converter = self._shared_converters.get(factory)
        if converter is None:
            converter = self._shared_converters.setdefault(factory, factory())
        return converter


class _ContextOutsideSandbox(WorkflowInstance):
    """A sandboxed instance whose converter questions are answered without entering it."""

    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self._sandboxed = sandboxed
        info = sandboxed.get_info()
        # What the sandboxed instance answers for its own commands; nothing reads it while
        # the converter stores no payload externally.
        self._store_context = StorageDriverStoreContext(
            target=StorageDriverWorkflowInfo(
                id=info.workflow_id,
                run_id=info.run_id,
                type=info.workflow_type,
                namespace=info.namespace,
            )
        )

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self._sandboxed.activate(act)

    def get_serialization_context(self, command_info: object) -> SerializationContext | None:
        return None

    def get_external_store_context(self, command_info: object) -> StorageDriverStoreContext:
        return self._store_context

    def get_info(self) -> temporalio.workflow.Info:
        return self._sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        # The deadlock detector reads it to show the stuck workflow's stack.
        return self._sandboxed.get_thread_id()


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
