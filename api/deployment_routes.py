"""`GET /deployments/{name}`: a worker deployment's versions, which is current or ramping, and
how many open threads run on each; what `weft deploy status` prints (docs/deploys.md)."""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path
from temporalio.service import RPCError

from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.api.models import error_responses
from weft.client.deploys import DeployError, Deploys
from weft.contract.wire import CamelModel

# Temporal's rule for a deployment name (no dots: `name.build` spells a version), and no
# control characters, as for thread ids.
DeploymentName = Annotated[
    str,
    Path(pattern=r"^[^.\x00-\x1f\x7f]{1,255}$", description="the worker deployment's name"),
]


class DeploymentVersion(CamelModel):
    """One version of the deployment."""

    build_id: str
    current: bool
    ramping_percent: float | None  # null: not ramping
    drainage: str  # Temporal's view: unspecified, draining, drained
    threads: int  # open threads whose current run is on this build (visibility: may lag)


class Deployment(CamelModel):
    """A worker deployment as Temporal keeps it, with the threads on each version."""

    name: str
    current_build_id: str | None  # null: unversioned workers take new threads
    versions: list[DeploymentVersion]


def router(ctx: ApiContext) -> APIRouter:
    """The deployment read route over `ctx` (read-only: promoting stays with the CLI and
    `weft.client.deploys`)."""
    routes = APIRouter(tags=["deployments"])

    @routes.get(
        "/deployments/{name}",
        response_model=Deployment,
        responses=error_responses(404, 422, 503),
        summary="A worker deployment's versions: which is current or ramping, its drainage, "
        "and how many open threads run on each",
    )
    async def read_deployment(name: DeploymentName) -> Deployment:
        try:
            status = await Deploys(ctx.client, name).status()
        except DeployError as err:
            raise GatewayError(404, str(err)) from None
        except RPCError as err:
            raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None
        return Deployment.model_validate(asdict(status))

    return routes
