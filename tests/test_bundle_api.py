"""`GET /threads/{id}/export` and `POST /threads/import` on the real API: a bundle over the
1 MiB body limit of other routes downloads from one server and uploads into another's store,
idempotently, and reads back through the thread routes."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile

import httpx
from api_support import API_TOKEN, api_stack
from bundle_support import SECRET, closed_thread
from support import store_of

from weft.api import bundle_routes
from weft.api.context import ApiContext
from weft.api.gateway import GatewayServer, create_app
from weft.client.threads import Threads
from weft.store import Store

BIG = os.urandom(1_500_000)  # random: compression cannot bring the bundle under 1 MiB


async def test_export_download_and_import_upload(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """The download is the bundle with its sha256 in a header and no secret; the upload
    makes a closed thread the thread routes read, a retry with its key replays the reply,
    a taken id is 409 and a corrupt bundle 422 naming the part."""
    worker, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    store_of(worker).files.write_file(thread_id, "/big.bin", BIG)
    async with api_stack(temporal_client, weft_config, "tq-none", store=store_of(worker)) as source:
        reply = await source.http.get(f"/threads/{thread_id}/export")
        assert reply.status_code == 200, reply.text
        assert reply.headers["content-type"] == "application/zip"
        bundle = reply.content
        assert len(bundle) > 1024 * 1024
        assert reply.headers["x-weft-bundle-sha256"] == hashlib.sha256(bundle).hexdigest()
        assert SECRET.encode() not in bundle
        missing = await source.http.get("/threads/no-such-thread/export")
        assert missing.status_code == 404, missing.text

    with Store.open(f"sqlite:///{tmp_path / 'target.db'}") as target:
        async with api_stack(temporal_client, weft_config, "tq-none", store=target) as stack:
            headers = {"Idempotency-Key": "import-1", "Content-Type": "application/zip"}
            url = "/threads/import?as=imported-api"
            first = await stack.http.post(url, content=bundle, headers=headers)
            assert first.status_code == 201, first.text
            assert first.json() == {
                "threadId": "imported-api",
                "sha256": hashlib.sha256(bundle).hexdigest(),
                "sourceThreadId": thread_id,
                "sourceNamespace": temporal_client.namespace,
                "status": "closed",
            }
            again = await stack.http.post(url, content=bundle, headers=headers)
            assert (again.status_code, again.json()) == (201, first.json())
            assert again.headers["idempotent-replayed"] == "true"
            taken = await stack.http.post(url, content=bundle)
            assert taken.status_code == 409 and "already exists" in taken.json()["error"]

            read = await stack.http.get("/threads/imported-api")
            assert read.status_code == 200, read.text
            assert read.json()["threadId"] == "imported-api"
            big = await stack.http.get("/threads/imported-api/files/big.bin")
            assert big.status_code == 200 and big.content == BIG

            corrupt = io.BytesIO()
            with zipfile.ZipFile(io.BytesIO(bundle)) as old, zipfile.ZipFile(corrupt, "w") as new:
                for name in old.namelist():
                    data = old.read(name)
                    new.writestr(name, data + b"\n" if name == "messages.jsonl" else data)
            bad = await stack.http.post("/threads/import", content=corrupt.getvalue())
            assert bad.status_code == 422, bad.text
            assert "part messages.jsonl is corrupt" in bad.json()["error"]


async def test_an_upload_over_the_limit_is_413(temporal_client, weft_config):
    """A bundle larger than the import route's limit is refused with 413 before it is read."""
    with Store.open(weft_config.store_url()) as store:
        ctx = ApiContext(
            store=store,
            client=temporal_client,
            threads=Threads(temporal_client, store=store),
            feed=None,  # type: ignore[arg-type]  # the bundle routes never read events
            task_queue="tq-none",
        )
        app = create_app(store, temporal_client, API_TOKEN)
        app.include_router(bundle_routes.router(ctx, max_bundle_bytes=1000))
        async with GatewayServer(app, port=0) as server:
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with httpx.AsyncClient(timeout=60, base_url=server.url, headers=headers) as http:
                reply = await http.post("/threads/import", content=b"x" * 2000)
        assert reply.status_code == 413, reply.text
        assert store.threads.list() == []
