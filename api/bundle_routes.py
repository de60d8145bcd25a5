"""`GET /threads/{id}/export` and `POST /threads/import`: a thread's bundle as a download,
and a bundle uploaded into this server's store as a closed thread (docs/export-import.md).
"""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

import asyncio
import os
import re
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, Response
from pydantic import Field
from starlette.background import BackgroundTask

from weft.api.auth import principal
from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import POST_ERRORS, error_responses
from weft.api.thread_routes import ID_PATH_PATTERN, ThreadId, check_chosen_id
from weft.client.bundles import bundle_thread_id, export_thread, import_bundle
from weft.contract.bundles import BundleError
from weft.contract.wire import CamelModel
from weft.store.bundle_rows import ThreadExists

# A bundle holds a thread's files and histories: far over the 1 MiB of other bodies. Kept
# at 64 MiB because the idempotency fingerprint hashes the whole body in memory; larger
# bundles go through `weft thread import`, which has no limit.
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
BUNDLE_MEDIA_TYPE = "application/zip"


class ImportResult(CamelModel):
    """What an import made: the thread, and the bundle it came from."""

    thread_id: str
    sha256: str = Field(description="the bundle's sha256: its stable ref")
    source_thread_id: str
    source_namespace: str
    status: str = "closed"


def router(ctx: ApiContext, *, max_bundle_bytes: int = MAX_BUNDLE_BYTES) -> APIRouter:
    """The two bundle routes over `ctx`; uploads over `max_bundle_bytes` are 413."""
    routes = APIRouter(tags=["threads"])
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]

    @routes.get(
        "/threads/{thread_id}/export",
        response_class=FileResponse,
        responses={200: {"content": {BUNDLE_MEDIA_TYPE: {}}}, **error_responses(404, 503)},
        summary="The thread's bundle (events, messages, files, KV, definitions, histories; "
        "env values never), recorded as `evidence.changed` on the thread",
    )
    async def export(thread_id: ThreadId) -> Response:
        handle, name = tempfile.mkstemp(suffix=".weftbundle")
        os.close(handle)
        try:
            ref = await export_thread(
                ctx.client, ctx.store, thread_id, name, namespace=ctx.client.namespace
            )
        except BundleError as err:
            os.unlink(name)
            raise GatewayError(404, str(err)) from None
        except BaseException:
            os.unlink(name)
            raise
        return FileResponse(
            name,
            media_type=BUNDLE_MEDIA_TYPE,
            filename=f"{thread_id}.weftbundle",
            headers={"X-Weft-Bundle-Sha256": ref.sha256},
            background=BackgroundTask(os.unlink, name),
        )

    @routes.post(
        "/threads/import",
        status_code=201,
        response_model=ImportResult,
        responses=error_responses(*POST_ERRORS),
        openapi_extra={"requestBody": {"content": {BUNDLE_MEDIA_TYPE: {}}, "required": True}},
        summary="Import a bundle (the body, as written by export) as a closed thread",
        max_body_size=max_bundle_bytes,
    )
    async def import_(
        request: Request,
        idem: Idempotent,
        as_id: Annotated[str | None, Query(alias="as", description="import under this id")] = None,
    ) -> Response:
        # Checked here, not by `Query(pattern=)`: a refused parameter of a body that is not
        # JSON would be answered 415 by the gateway's handler.
        if as_id is not None and not re.fullmatch(ID_PATH_PATTERN, as_id):
            raise GatewayError(422, f"as: {as_id!r} is not a thread id", fields=["as"])

        # A tenant's key imports into its tenant (the bundle's tenant is not kept); the
        # server's token and `admin` keep the one the bundle's thread row names.
        tenant = principal(request).confined_to

        async def act() -> Reply:
            body = await request.body()
            if not body:
                raise GatewayError(400, "body: send the bundle's bytes", fields=["body"])
            return Reply(201, await _imported(body, as_id, tenant))

        return await idem.run(act)

    async def _imported(body: bytes, as_id: str | None, tenant: str | None) -> ImportResult:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "upload.weftbundle"
            await asyncio.to_thread(path.write_bytes, body)
            try:
                if tenant is not None:
                    # The id is checked as a chosen start id is: the answer never says
                    # whether another tenant holds it (thread_routes.check_chosen_id).
                    thread_id: str = (
                        as_id if as_id else await asyncio.to_thread(bundle_thread_id, path)
                    )
                    await check_chosen_id(ctx, thread_id, tenant, field="as")
                ref = await import_bundle(ctx.store, path, as_id=as_id, tenant=tenant)
            except BundleError as err:
                raise GatewayError(422, str(err), fields=["body"]) from None
            except ThreadExists as err:
                raise GatewayError(409, str(err), fields=["as"] if as_id else []) from None
        return ImportResult(
            thread_id=ref.thread_id,
            sha256=ref.sha256,
            source_thread_id=ref.manifest.thread_id,
            source_namespace=ref.manifest.source_namespace,
        )

    return routes
