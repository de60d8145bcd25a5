"""Deploys: a worker deployment's versions, promotion and draining (docs/deploys.md).

Temporal keeps the deployment (versions, which is current or ramping); visibility says
which build each open thread runs on (`TemporalWorkerDeploymentVersion`). A thread is
pinned to its build within a run and moves to the current version at its next safe point
(workflows/continuation.py): `drain_report` says which safe point that is for each thread.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from google.protobuf.message import Message
from temporalio.api.deployment.v1 import WorkerDeploymentInfo
from temporalio.api.enums.v1 import RoutingConfigUpdateState
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client, WorkflowExecution
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.deploys import SIGNAL_UPGRADE_CHECK
from weft.contract.thread import WORKFLOW_TYPE

# How long `promote` waits for Temporal to route the deployment's task queues anew.
PROPAGATION_TIMEOUT_SECONDS = 30.0

_STATUS = "WeftStatus"
_AWAITING = "WeftAwaitingAction"
_AGENT = "WeftAgent"


class DeployError(ValueError):
    """A deploy request names something Temporal does not know, or is malformed."""


@dataclass(frozen=True)
class VersionStatus:
    """One version of the deployment: its role, Temporal's drainage view, its threads."""

    build_id: str
    current: bool
    ramping_percent: float | None  # None: not ramping
    drainage: str  # Temporal's: unspecified, draining, drained
    threads: int  # open threads whose current run is on this build


@dataclass(frozen=True)
class DeploymentStatus:
    name: str
    current_build_id: str | None  # None: unversioned workers take new threads
    versions: list[VersionStatus]


@dataclass(frozen=True)
class DrainingThread:
    """An open thread still on the version, and when it next reaches a safe point."""

    thread_id: str
    agent: str | None
    status: str | None
    awaiting_action: str | None
    next_safe_point: str


@dataclass(frozen=True)
class DrainReport:
    build_id: str
    current: bool
    ramping: bool
    threads: list[DrainingThread]

    @property
    def may_stop(self) -> bool:
        """True once no open thread runs on the version and no new one can reach it."""
        return not (self.current or self.ramping or self.threads)


def next_safe_point(status: str | None, awaiting_action: str | None) -> str:
    """When a thread on an old version next reaches a point where it moves, from what
    visibility says of it. Honest, not a time: each depends on something to happen."""
    if awaiting_action:
        return f"after a person answers its {awaiting_action} and its turn ends"
    if status == "running":
        return "when its running turn ends"
    return (
        "at its next wake (a message, an effect's alarm, or `weft deploy drain-report "
        "--wake`), once its subagents are done"
    )


class Deploys:
    """One worker deployment of `client`'s namespace.

    ```python
    deploys = Deploys(client, "weft")
    await deploys.promote("weft-0.2.0-1a2b3c4d5e6f", ramp=10)   # 10% of new threads
    report = await deploys.drain_report("weft-0.1.0-9f8e7d6c5b4a")
    ```
    """

    def __init__(self, client: Client, deployment: str) -> None:
        if not deployment or "." in deployment:
            raise DeployError(f"deployment name {deployment!r} must be non-empty, without dots")
        self._client = client
        self.name = deployment

    async def _describe(self) -> WorkerDeploymentInfo:
        request = DescribeWorkerDeploymentRequest(
            namespace=self._client.namespace, deployment_name=self.name
        )
        try:
            described = await self._client.workflow_service.describe_worker_deployment(request)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise DeployError(
                    f"no worker deployment {self.name!r}: no versioned worker has polled yet"
                ) from None
            raise
        return described.worker_deployment_info

    async def status(self) -> DeploymentStatus:
        """The versions Temporal knows, which is current or ramping, and their threads."""
        info = await self._describe()
        routing = info.routing_config
        current = routing.current_deployment_version.build_id or None
        ramping = routing.ramping_deployment_version.build_id or None
        versions = []
        for summary in info.version_summaries:
            build_id = summary.deployment_version.build_id
            versions.append(
                VersionStatus(
                    build_id=build_id,
                    current=build_id == current,
                    ramping_percent=routing.ramping_version_percentage
                    if build_id == ramping
                    else None,
                    drainage=_enum_word(summary, "drainage_status"),
                    threads=await self.count_threads(build_id),
                )
            )
        return DeploymentStatus(name=self.name, current_build_id=current, versions=versions)

    async def promote(
        self,
        build_id: str,
        *,
        ramp: float | None = None,
        propagation_timeout: float = PROPAGATION_TIMEOUT_SECONDS,
    ) -> bool:
        """Make `build_id` current, or, with `ramp`, the ramping version for that percent of
        new threads (and of threads moving at continue-as-new). Returns once Temporal has
        told the deployment's task queues (a thread woken earlier would not see it yet):
        True, or False when `build_id` was current already with no ramp (nothing to do).
        Promoting the current version again stops a ramp."""
        if not build_id:
            raise DeployError("build id must be non-empty")
        if ramp is not None and not 0 < ramp <= 100:
            raise DeployError(f"ramp must be a percent above 0 and at most 100, not {ramp:g}")
        try:
            info = await self._describe()
        except DeployError as err:
            raise DeployError(f"cannot promote {self.name}.{build_id}: {err}") from None
        known = [v.deployment_version.build_id for v in info.version_summaries]
        if build_id not in known:
            raise DeployError(
                f"cannot promote {self.name}.{build_id}: no worker of build {build_id!r} has "
                f"polled yet (versions: {', '.join(known) or 'none'}); start its workers first"
            )
        routing = info.routing_config
        if build_id == routing.current_deployment_version.build_id:
            if ramp is None and not routing.ramping_deployment_version.build_id:
                return False
            if ramp is None:  # current already: promoting it again stops the ramp
                await self._set_routing(build_id="", ramp=0.0)
                await self._until_routed(propagation_timeout)
                return True
            raise DeployError(
                f"cannot ramp {self.name}.{build_id}: it is already current (ramp a version "
                "that is not, or promote another one first)"
            )
        await self._set_routing(build_id=build_id, ramp=ramp)
        await self._until_routed(propagation_timeout)
        return True

    async def _set_routing(self, *, build_id: str, ramp: float | None) -> None:
        """Make `build_id` current (`ramp` None) or ramping (an empty one: no ramp)."""
        service, namespace = self._client.workflow_service, self._client.namespace
        identity = self._client.identity
        try:
            if ramp is None:
                await service.set_worker_deployment_current_version(
                    SetWorkerDeploymentCurrentVersionRequest(
                        namespace=namespace,
                        deployment_name=self.name,
                        build_id=build_id,
                        identity=identity,
                    )
                )
            else:
                await service.set_worker_deployment_ramping_version(
                    SetWorkerDeploymentRampingVersionRequest(
                        namespace=namespace,
                        deployment_name=self.name,
                        build_id=build_id,
                        percentage=ramp,
                        identity=identity,
                    )
                )
        except RPCError as err:
            # The version's state changed since it was read above (or Temporal refuses the
            # move for a reason of its own): its words.
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise DeployError(f"cannot promote {self.name}.{build_id}: {err.message}") from None
            raise

    async def _until_routed(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        done = RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
        while True:
            if (await self._describe()).routing_config_update_state == done:
                return
            if loop.time() > deadline:
                raise DeployError(
                    f"{self.name}: the new routing has not reached every task queue after "
                    f"{timeout:g} s; threads move once it has (see `weft deploy status`)"
                )
            await asyncio.sleep(0.2)

    async def count_threads(self, build_id: str) -> int:
        """Open threads whose current run is on `build_id` (visibility: may lag a second)."""
        counted = await self._client.count_workflows(self._threads_query(build_id))
        return counted.count

    async def drain_report(self, build_id: str) -> DrainReport:
        """The open threads still on `build_id`, and when each reaches its next safe point."""
        status = await self.status()
        version = next((v for v in status.versions if v.build_id == build_id), None)
        if version is None:
            known = ", ".join(v.build_id for v in status.versions) or "none"
            raise DeployError(f"no version {build_id!r} in deployment {self.name} (has: {known})")
        threads = [
            _draining(execution)
            async for execution in self._client.list_workflows(self._threads_query(build_id))
        ]
        return DrainReport(
            build_id=build_id,
            current=version.current,
            ramping=version.ramping_percent is not None,
            threads=sorted(threads, key=lambda t: t.thread_id),
        )

    async def wake(self, build_id: str) -> list[str]:
        """Signal the idle threads on `build_id` to check for a new version now; returns
        their ids. A thread that is running or waits on a person moves on its own."""
        woken = []
        async for execution in self._client.list_workflows(self._threads_query(build_id)):
            if _draining(execution).status == "running" or _awaiting(execution):
                continue
            handle = self._client.get_workflow_handle(execution.id, run_id=execution.run_id)
            try:
                await handle.signal(SIGNAL_UPGRADE_CHECK)
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:  # it closed or moved meanwhile
                    raise
                continue
            woken.append(execution.id)
        return woken

    def _threads_query(self, build_id: str) -> str:
        version = WorkerDeploymentVersion(self.name, build_id)
        return (
            f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' AND "
            f"TemporalWorkerDeploymentVersion = '{_quoted(version_value(version))}'"
        )


def version_value(version: WorkerDeploymentVersion) -> str:
    """How visibility spells a version in `TemporalWorkerDeploymentVersion`."""
    return f"{version.deployment_name}:{version.build_id}"


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _keyword(execution: WorkflowExecution, name: str) -> str | None:
    values = execution.search_attributes.get(name)
    return str(values[0]) if values else None


def _awaiting(execution: WorkflowExecution) -> str | None:
    return _keyword(execution, _AWAITING)


def _draining(execution: WorkflowExecution) -> DrainingThread:
    status, awaiting = _keyword(execution, _STATUS), _awaiting(execution)
    return DrainingThread(
        thread_id=execution.id,
        agent=_keyword(execution, _AGENT),
        status=status,
        awaiting_action=awaiting,
        next_safe_point=next_safe_point(status, awaiting),
    )


def _enum_word(message: Message, field: str) -> str:
    """A proto enum field's value as its last lowercase word (`DRAINAGE_STATUS_DRAINED`:
    `drained`)."""
    number = getattr(message, field)
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type
    if enum is None or number not in enum.values_by_number:
        return str(number)
    name: str = enum.values_by_number[number].name
    return name.rsplit("_", 1)[-1].lower()
