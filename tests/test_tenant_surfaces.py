"""The surfaces that were the operator's alone, scoped by tenant (docs/tenants.md).

Against a real `weft serve` app (uvicorn on loopback), a worker on the scripted model and
the session's dev server: a chosen thread id never tells a tenant's key whether another
tenant's thread holds it; forks, rewinds, exports and imports with a tenant's key reach
its tenant's threads only (another's is 404, as an unknown one); `GET
/threads/{id}/effects` lists a thread's pending effects; a schedule belongs to a tenant and
its threads are that tenant's, in the store and in Temporal's visibility.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from api_support import ApiStack, api_stack
from effect_support import effect_definitions
from fork_support import turn_ends, turn_id_of
from schedule_support import cli_config, eventually, schedule_name, weft_cli, weft_ok
from support import add_script, agent_definitions

from weft.api.auth import TENANT_ATTRIBUTE
from weft.client.schedules import ScheduleError, Schedules
from weft.client.threads import Threads

SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]}]}
WRITE = ["threads:read", "threads:write"]


def _client(stack: ApiStack, tenant: str, scopes: list[str]) -> httpx.AsyncClient:
    key = stack.store.api_keys.create(tenant, scopes).secret
    return httpx.AsyncClient(
        timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
    )


async def _start(http: httpx.AsyncClient, **body: Any) -> str:
    reply = await http.post("/threads", json={"agent": "helper", **body})
    assert reply.status_code == 201, reply.text
    thread_id: str = reply.json()["threadId"]
    return thread_id


async def _turn_ended(stack: ApiStack, thread_id: str) -> str:
    """The id of the thread's first finished turn, once it has one (bounded wait)."""

    async def ended() -> list[Any]:
        return await asyncio.to_thread(turn_ends, stack.store, thread_id)

    return turn_id_of((await eventually(ended, lambda found: bool(found)))[0])


def _error(reply: httpx.Response, thread_id: str) -> str:
    """The reply's error with the id it names blanked out, to compare refusals' words."""
    assert reply.status_code == 422, reply.text
    message: str = reply.json()["error"]
    return message.replace(repr(thread_id), "<id>")


async def test_a_chosen_thread_id_does_not_tell_whether_another_tenant_holds_it(
    start_worker, temporal_client, weft_config, scripted_server
):
    """A key naming a thread id that another tenant's running thread holds gets exactly the
    refusal a free id outside its space gets (before: 409 for the held id, 201 for the
    free one, so the 409 said another tenant's thread exists). Its own space (`acme:…`)
    and its own threads start and conflict as before."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        async with (
            _client(stack, "acme", WRITE) as acme,
            _client(stack, "globex", WRITE) as globex,
        ):
            theirs = await _start(globex)  # running, globex's
            their_spaced = await _start(globex, threadId=f"globex:{uuid.uuid4().hex[:8]}")
            free = f"helper-{uuid.uuid4().hex[:12]}"

            held = await acme.post("/threads", json={"agent": "helper", "threadId": theirs})
            unheld = await acme.post("/threads", json={"agent": "helper", "threadId": free})
            assert _error(held, theirs) == _error(unheld, free)
            assert held.json()["fields"] == unheld.json()["fields"] == ["threadId"]
            assert "begins with 'acme:'" in held.text
            spaced = await acme.post("/threads", json={"agent": "helper", "threadId": their_spaced})
            assert _error(spaced, their_spaced) == _error(unheld, free)
            # Nothing was started or changed by the refusals.
            assert stack.store.threads.tenant(theirs) == "globex"
            assert stack.store.threads.get(free) is None

            mine = f"acme:{uuid.uuid4().hex[:8]}"
            assert await _start(acme, threadId=mine) == mine
            assert stack.store.threads.tenant(mine) == "acme"
            again = await acme.post("/threads", json={"agent": "helper", "threadId": mine})
            assert again.status_code == 409, again.text  # its own running thread
            # The server's token (admin) chooses any id, as before.
            assert await _start(stack.http, threadId=free) == free


async def test_forks_exports_imports_and_effects_of_a_tenants_own_threads(
    start_worker, temporal_client, weft_config, scripted_server
):
    """With `threads:write`, a tenant forks and rewinds its own thread (the fork is its
    tenant's, in the store and in `WeftTenant`); with `threads:read` it exports it and
    lists its pending effects; it imports a bundle into its tenant under an id of its
    space, never learning whether another tenant holds the bundle's id. Another tenant's
    key gets 404 on each, a read-only key 403 on the writes."""
    worker = await start_worker(effect_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        async with (
            _client(stack, "acme", WRITE) as acme,
            _client(stack, "acme", ["threads:read"]) as reader,
            _client(stack, "globex", WRITE) as globex,
        ):
            ours = await _start(acme, messages=["hello"])
            turn = await _turn_ended(stack, ours)

            forked = await acme.post(f"/threads/{ours}/fork", json={"at": turn})
            assert forked.status_code == 201, forked.text
            fork_id = forked.json()["threadId"]
            assert stack.store.threads.tenant(fork_id) == "acme"
            described = await temporal_client.get_workflow_handle(fork_id).describe()
            assert described.typed_search_attributes.get(TENANT_ATTRIBUTE) == "acme"
            assert (await acme.get(f"/threads/{fork_id}")).status_code == 200
            refused = await globex.post(f"/threads/{ours}/fork", json={"at": turn})
            assert refused.status_code == 404 and f"no thread {ours!r}" in refused.text
            denied = await reader.post(f"/threads/{ours}/fork", json={"at": turn})
            assert denied.status_code == 403 and "threads:write" in denied.text

            # Effects: the pending ones, as `weft thread effects` lists them.
            await Threads(temporal_client).schedule_effect(
                ours, "remind", {"text": "later"}, delay_ms=3_600_000, effect_id="fx-later"
            )
            listed = await reader.get(f"/threads/{ours}/effects")
            assert listed.status_code == 200, listed.text
            (effect,) = listed.json()["effects"]
            assert listed.json()["threadId"] == ours
            assert (effect["id"], effect["name"], effect["args"], effect["due"]) == (
                "fx-later",
                "remind",
                {"text": "later"},
                False,
            )
            assert (await globex.get(f"/threads/{ours}/effects")).status_code == 404
            assert (await acme.get(f"/threads/{fork_id}/effects")).json()["effects"] == []

            # Export with `threads:read`; another tenant's is 404.
            exported = await reader.get(f"/threads/{ours}/export")
            assert exported.status_code == 200, exported.text
            bundle = exported.content
            assert (await globex.get(f"/threads/{ours}/export")).status_code == 404

            # Import: globex may not take acme's id (held) nor a free id outside its space,
            # with the same words; under its own space the thread is globex's.
            upload = {"Content-Type": "application/zip"}
            held = await globex.post("/threads/import", content=bundle, headers=upload)
            free = f"helper-{uuid.uuid4().hex[:12]}"
            unheld = await globex.post(
                "/threads/import", params={"as": free}, content=bundle, headers=upload
            )
            assert _error(held, ours) == _error(unheld, free)
            assert held.json()["fields"] == ["as"]
            copy = f"globex:{uuid.uuid4().hex[:8]}"
            imported = await globex.post(
                "/threads/import", params={"as": copy}, content=bundle, headers=upload
            )
            assert imported.status_code == 201, imported.text
            assert stack.store.threads.tenant(copy) == "globex"
            assert (await globex.get(f"/threads/{copy}/effects")).status_code == 200
            assert (await acme.get(f"/threads/{copy}")).status_code == 404
            assert (await reader.post("/threads/import", content=bundle)).status_code == 403

            # Rewind: globex cannot; acme can, and its successor is acme's.
            assert (
                await globex.post(f"/threads/{ours}/rewind", json={"at": turn})
            ).status_code == 404
            rewound = await acme.post(f"/threads/{ours}/rewind", json={"at": turn})
            assert rewound.status_code == 200, rewound.text
            assert stack.store.threads.tenant(rewound.json()["threadId"]) == "acme"


async def test_a_schedule_starts_its_tenants_threads(
    start_worker, temporal_client, weft_config, scripted_server, tmp_path
):
    """`weft schedule create … --tenant acme` (and `Schedules.create(tenant=)`): each
    thread a run starts is acme's, in the store's row and in `WeftTenant`; list filters by
    tenant; a `--thread` schedule is its thread's tenant's, and naming another is refused.
    A tenant's schedule is named in its space: `acme:NAME`, as the operator names it."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)
    name = schedule_name("acme")
    full = f"acme:{name}"
    created = await weft_ok(
        config,
        "schedule",
        "create",
        name,
        "--every",
        "1h",
        "--agent",
        "helper",
        "-m",
        "hi",
        "--tenant",
        "acme",
    )
    try:
        assert created.startswith(f"created schedule {full}: agent helper (a new thread each run)")
        assert "for tenant acme" in created
        await weft_ok(config, "schedule", "trigger", full)
        shown = await eventually(
            lambda: schedules.describe(full),
            lambda s: any(run.thread_id for run in s.recent_runs),
        )
        assert shown.tenant == "acme"
        thread_id = next(run.thread_id for run in shown.recent_runs if run.thread_id)
        assert thread_id is not None
        described = await temporal_client.get_workflow_handle(thread_id).describe()
        assert described.typed_search_attributes.get(TENANT_ATTRIBUTE) == "acme"
        row_tenant = await eventually(
            lambda: asyncio.to_thread(worker.store.threads.tenant, thread_id),
            lambda tenant: tenant is not None,
        )
        assert row_tenant == "acme"
        assert full in [s.name for s in await schedules.list(tenant="acme")]
        assert full not in [s.name for s in await schedules.list(tenant="globex")]
        listed = await weft_ok(config, "schedule", "list", "--tenant", "globex")
        assert name not in listed

        # A thread schedule is its thread's tenant's; named for another tenant, the thread
        # is not found, in the words of an unknown one (nothing said of whose it is).
        threads = Threads(temporal_client, task_queue=worker.task_queue)
        standing = await threads.start("helper", tenant="globex")
        for thread_id in (standing.id, "no-such-thread"):
            with pytest.raises(ScheduleError) as refused:
                await schedules.create(
                    f"{name}-x", message="x", thread=thread_id, every="1h", tenant="acme"
                )
            assert str(refused.value) == f"thread {thread_id!r} not found"
        made = await schedules.create(f"{name}-t", message="x", thread=standing.id, every="1h")
        try:
            assert made.id == f"globex:{name}-t"
            assert (await schedules.describe(made.id)).tenant == "globex"
        finally:
            await schedules.delete(made.id)
        code, _, err = await weft_cli(
            config, "schedule", "create", f"{name}-b", "--every", "1h", "--agent", "helper",
            "-m", "x", "--tenant", "a b",
        )  # fmt: skip
        assert code == 1 and "tenant: tenant 'a b'" in err and "Traceback" not in err
    finally:
        await schedules.delete(full)
