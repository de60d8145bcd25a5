"""Worker Versioning for a weft worker: its deployment version and build id (docs/deploys.md)."""

from __future__ import annotations

import asyncio
from importlib import metadata

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError
from temporalio.worker import WorkerDeploymentConfig

from weft.definitions import Definitions
from weft.definitions.digest import definitions_digest
from weft.workers.config import ConfigError, DeploymentConfig

# How long a worker that sets itself current waits for Temporal to know its version: the
# server registers a version when its first poll arrives.
SET_CURRENT_TIMEOUT_SECONDS = 30.0


def weft_version() -> str:
    """The installed weft's version ("0" in a checkout that was never installed)."""
    try:
        return metadata.version("weft")
    except metadata.PackageNotFoundError:
        return "0"


def default_build_id(definitions: Definitions) -> str:
    """`weft-<version>-<12 hex of the definitions digest>`: a new weft or new definitions
    make a new version, the same ones on another machine make the same."""
    return f"weft-{weft_version()}-{definitions_digest(definitions)[:12]}"


def deployment_version(
    config: DeploymentConfig, definitions: Definitions
) -> WorkerDeploymentVersion | None:
    """The version a worker joins, or None for an unversioned worker (no deployment name)."""
    if config.name is None:
        if config.build_id is not None:
            raise ConfigError("deployment.buildId is set without deployment.name")
        return None
    if not config.name or "." in config.name:
        raise ConfigError(f"deployment.name: {config.name!r} must be non-empty, without dots")
    build_id = config.build_id or default_build_id(definitions)
    return WorkerDeploymentVersion(deployment_name=config.name, build_id=build_id)


def deployment_options(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """Worker options of a versioned worker: every workflow pinned by default.

    `AgentThread` runs a whole run on one build and moves at an idle continue-as-new
    (workflows/continuation.py); a scheduled delivery is short. The behaviour is the
    worker's, not the workflow's: a workflow that declared one would have every task of an
    unversioned worker refused ("versioning behavior cannot be specified without
    deployment options").
    """
    return WorkerDeploymentConfig(
        version=version,
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def set_current_when_polling(
    client: Client,
    version: WorkerDeploymentVersion,
    *,
    timeout: float = SET_CURRENT_TIMEOUT_SECONDS,
) -> None:
    """Make `version` its deployment's current version, once Temporal knows it."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace,
        deployment_name=version.deployment_name,
        build_id=version.build_id,
        identity=client.identity,
        ignore_missing_task_queues=True,
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError as err:
            # NotFound until the first poll registers the version.
            if loop.time() > deadline:
                raise RuntimeError(
                    f"could not make {version.to_canonical_string()} current: {err.message}"
                ) from err
        await asyncio.sleep(0.2)
