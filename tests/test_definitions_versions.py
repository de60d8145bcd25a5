"""Definitions versions: a thread records the digest of its definitions, takes a worker's
newer ones only at a turn boundary (`latest`) or when upgraded (`pinned`), and records the
move as `policy.changed`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yaml
from support import (
    add_script,
    event_schema_validator,
    idle_after,
    read,
    start_thread,
    store_of,
    wait_until,
    weft_cli,
)
from temporalio.client import Client

from weft.client.threads import Threads
from weft.contract.definitions_version import snapshot_digest
from weft.contract.events import Event
from weft.contract.rebuild import thread_read_from_events
from weft.definitions import (
    DefinitionError,
    Definitions,
    define_agent,
    define_model,
    define_prompt,
)
from weft.definitions.digest import definitions_digest
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer
from weft.workflows.search_attributes import DEFINITIONS_DIGEST


def versioned(
    script: str, prompt: str, *, policy: str = "latest", tools: list[str] | None = None
) -> Definitions:
    """One agent whose prompt text is `prompt`: the only difference between two versions."""
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="helper_prompt",
            toolDescription="helps",
            model="scripted",
            prompt=prompt,
            tools=tools or [],
        ),
        define_agent(name="helper", sideA={"prompt": "helper_prompt"}, definitionsPolicy=policy),
    )


@asynccontextmanager
async def serving(
    client: Client,
    config: WeftConfig,
    scripted: ScriptedModelServer,
    definitions: Definitions,
    task_queue: str,
) -> AsyncIterator[AgentWorker]:
    """A worker of `definitions` on `task_queue`, stopped on leaving (a deploy's restart)."""
    worker = AgentWorker(
        client, config, definitions=definitions, scripted=scripted, task_queue=task_queue
    )
    await worker.__aenter__()
    try:
        yield worker
    finally:
        await asyncio.wait_for(worker.__aexit__(None, None, None), timeout=90)


def events_of(worker: AgentWorker, thread_id: str) -> list[Event]:
    return store_of(worker).events.read(thread_id, limit=10_000)


def system_prompts(scripted: ScriptedModelServer, script: str) -> list[str]:
    """The system prompt of each request to `script`, oldest first."""
    prompts = []
    for request in scripted.requests:
        if request["model"] == script:
            system = [m for m in request["messages"] if m["role"] == "system"]
            prompts.append(str(system[0]["content"]) if system else "")
    return prompts


async def send(handle: Any, text: str) -> None:
    await handle.signal("queue_message", {"role": "user", "content": text})


async def test_thread_records_its_definitions_digest(temporal_client, weft_config, scripted_server):
    """thread_read, the session snapshot, turn.started, the WeftDefinitionsDigest search
    attribute and the store all name the digest of the definitions the thread runs with."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    definitions = versioned(script, "You are version one.")
    digest = snapshot_digest(definitions.snapshot("helper"))
    assert digest == definitions_digest(definitions.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, definitions, queue) as w:
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "hi"}]
        )
        state = await wait_until(handle, idle_after(1))
        assert state.definitions_digest == digest
        shell = (await handle.query("session_snapshot"))["threads"][0]
        assert shell["definitionsDigest"] == digest
        attributes = (await handle.describe()).typed_search_attributes
        assert attributes.get(DEFINITIONS_DIGEST) == digest
        (started,) = [e for e in events_of(w, handle.id) if e.type == "turn.started"]
        assert started.payload["definitionsDigest"] == digest
        snapshot_id = store_of(w).definitions_versions.snapshot_id(digest)
        assert snapshot_id == definitions.snapshot("helper").snapshot_id
        assert store_of(w).snapshots.get(snapshot_id) is not None
        await handle.signal("terminate", {"reason": "done"})


async def test_latest_thread_takes_new_definitions_at_its_next_turn(
    temporal_client, weft_config, scripted_server
):
    """A worker restarted with a changed prompt: the idle `latest` thread's next turn runs
    with it, after a schema-valid `policy.changed` naming both digests and the prompt."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    v1, v2 = versioned(script, "You are version one."), versioned(script, "You are version two.")
    d1, d2 = snapshot_digest(v1.snapshot("helper")), snapshot_digest(v2.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "first"}]
        )
        await wait_until(handle, idle_after(1))
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        await send(handle, "second")
        state = await wait_until(handle, idle_after(2))
        assert state.definitions_digest == d2
        assert system_prompts(scripted_server, script) == [
            "You are version one.",
            "You are version two.",
        ]
        events = events_of(worker, handle.id)
        (changed,) = [e for e in events if e.type == "policy.changed"]
        assert changed.payload["previousDigest"] == d1
        assert changed.payload["definitionsDigest"] == d2
        assert changed.payload["reason"] == "latest"
        assert changed.payload["changes"] == [
            {"kind": "prompts", "name": "helper_prompt", "change": "changed"}
        ]
        event_schema_validator().validate(
            changed.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        second_turn = [e for e in events if e.type == "turn.started"][1]
        assert changed.sequence is not None and second_turn.sequence is not None
        assert changed.sequence < second_turn.sequence  # at the boundary, before the turn
        attributes = (await handle.describe()).typed_search_attributes
        assert attributes.get(DEFINITIONS_DIGEST) == d2
        assert thread_read_from_events(events).definitions_digest == d2
        await handle.signal("terminate", {"reason": "done"})


async def test_pinned_thread_keeps_its_prompt_until_upgraded(
    temporal_client, weft_config, scripted_server
):
    """A `pinned` thread runs its old prompt on a worker with new definitions until
    `upgrade_definitions` moves it; the next turn then runs the new prompt."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    v1 = versioned(script, "You are version one.", policy="pinned")
    v2 = versioned(script, "You are version two.", policy="pinned")
    d1, d2 = snapshot_digest(v1.snapshot("helper")), snapshot_digest(v2.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "first"}]
        )
        await wait_until(handle, idle_after(1))
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        await send(handle, "second")
        state = await wait_until(handle, idle_after(2))
        assert state.definitions_digest == d1
        assert system_prompts(scripted_server, script)[-1] == "You are version one."
        assert not [e for e in events_of(worker, handle.id) if e.type == "policy.changed"]

        result = await Threads(temporal_client, task_queue=queue).upgrade(handle.id)
        assert (result.status, result.previous_digest, result.digest) == ("upgraded", d1, d2)
        assert [(c.kind, c.name) for c in result.changes] == [("prompts", "helper_prompt")]
        assert (await read(handle)).definitions_digest == d2
        again = await Threads(temporal_client, task_queue=queue).upgrade(handle.id)
        assert again.status == "unchanged"

        await send(handle, "third")
        await wait_until(handle, idle_after(3))
        assert system_prompts(scripted_server, script)[-1] == "You are version two."
        (changed,) = [e for e in events_of(worker, handle.id) if e.type == "policy.changed"]
        assert changed.payload["reason"] == "upgrade"
        await handle.signal("terminate", {"reason": "done"})


async def test_upgrade_during_a_turn_waits_for_the_turn_to_end(
    temporal_client, weft_config, scripted_server
):
    """An upgrade asked while a turn waits on a person answers `pending`; the thread keeps
    its definitions for that turn and moves as soon as the turn ends."""
    asking = {
        "turns": [
            {
                "match": "ask me",
                "replies": [
                    {"tool_calls": [{"name": "ask_human", "arguments": {"question": "?"}}]}
                ],
            },
            {"match": "*", "replies": [{"text": "ok"}]},
        ]
    }
    script = add_script(scripted_server, asking)
    v1 = versioned(script, "You are version one.", policy="pinned", tools=["ask_human"])
    v2 = versioned(script, "You are version two.", policy="pinned", tools=["ask_human"])
    d1, d2 = snapshot_digest(v1.snapshot("helper")), snapshot_digest(v2.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(temporal_client, queue)
        await wait_until(handle, lambda s: s.status == "waiting_input")
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        threads = Threads(temporal_client, task_queue=queue)
        await send(handle, "ask me")
        await wait_until(handle, lambda s: bool(s.pending_actions))
        result = await threads.upgrade(handle.id)
        assert (result.status, result.previous_digest) == ("pending", d1)
        assert (await read(handle)).definitions_digest == d1
        await threads.interrupt_turn(handle.id, reason="enough")
        state = await wait_until(handle, lambda s: s.definitions_digest == d2)
        assert state.active_turn_id is None
        (changed,) = [e for e in events_of(worker, handle.id) if e.type == "policy.changed"]
        assert changed.payload["reason"] == "upgrade"
        await send(handle, "hello")
        await wait_until(handle, idle_after(2))
        assert system_prompts(scripted_server, script)[-1] == "You are version two."
        await handle.signal("terminate", {"reason": "done"})


async def test_weft_thread_upgrade_says_what_it_did(
    temporal_client, weft_config, scripted_server, tmp_path
):
    """`weft thread upgrade ID` moves a pinned thread and names what changed, then says it
    is already on the newest definitions."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    v1 = versioned(script, "You are version one.", policy="pinned")
    v2 = versioned(script, "You are version two.", policy="pinned")
    d1, d2 = snapshot_digest(v1.snapshot("helper")), snapshot_digest(v2.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(temporal_client, queue)
        await wait_until(handle, lambda s: s.status == "waiting_input")
    async with serving(temporal_client, weft_config, scripted_server, v2, queue):
        code, out, err = await weft_cli(config, "thread", "upgrade", handle.id)
        assert (code, err) == (0, ""), err
        assert out == (
            f"{handle.id} upgraded: definitions {d1[:12]} -> {d2[:12]}; "
            "changed: prompts helper_prompt (changed)\n"
        )
        code, out, _ = await weft_cli(config, "thread", "upgrade", handle.id)
        assert (code, out) == (0, f"{handle.id} already runs the newest definitions ({d2[:12]})\n")
        await handle.signal("terminate", {"reason": "done"})


def test_digest_names_content_not_process():
    """The same definitions give the same digest; a changed prompt gives another."""
    one = versioned("s", "You are version one.")
    assert definitions_digest(one) == definitions_digest(versioned("s", "You are version one."))
    assert definitions_digest(one) != definitions_digest(versioned("s", "You are version two."))
    assert len(definitions_digest(one)) == 64


def test_a_bad_definitions_policy_is_refused_naming_the_field():
    """`definitionsPolicy` takes `latest` or `pinned`; anything else names the field."""
    with pytest.raises(DefinitionError, match="definitionsPolicy"):
        define_agent(name="a", sideA={"prompt": "p"}, definitionsPolicy="sometimes")
