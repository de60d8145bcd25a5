"""Secret env end to end: encrypted in Temporal history and the store, never shown to models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text
from support import (
    StartWorker,
    add_script,
    idle_after,
    json_texts,
    start_thread,
    store_of,
    temporal_cli,
    wait_until,
)

from weft.activities.crypto import new_key, parse_keys
from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from weft.transport.codec import EncryptionCodec
from weft.transport.connection import connect
from weft.workers.codec_server import CodecServer
from weft.workers.config import WeftConfig
from weft.workers.dev_server import DevServer
from weft.workers.scripted_model import ScriptedModelServer

SECRET = "sk-live-7f3a9c1e5b2d4a6f"
TEXT_VALUE = "Reykjavik-text-env"
AGENT_SECRET = "org-key-2b8e61d0c4"  # in the agent definition's env, so in its snapshot


class CallArgs(BaseModel):
    """Arguments of the call_api tool."""

    endpoint: str


async def call_api(state: Any, args: CallArgs) -> dict[str, Any]:
    """Uses the secret the way a real tool would (without returning it)."""
    token = state.env("API_TOKEN")
    return {"endpoint": args.endpoint, "authorised": token == SECRET, "tokenLength": len(token)}


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="api_prompt",
            toolDescription="calls the API",
            model="scripted",
            prompt=[
                {"type": "text", "content": "You call the API for the user."},
                {"type": "env", "property": "API_TOKEN"},
                {"type": "env", "property": "CITY"},
            ],
            tools=["call_api"],
        ),
        define_agent(
            name="api_agent", sideA={"prompt": "api_prompt"}, env={"ORG_KEY": AGENT_SECRET}
        ),
        define_tool(name="call_api", description="Call the API", args=CallArgs, execute=call_api),
    )


async def _cli_start(
    address: str, task_queue: str, thread_id: str, *extra: str
) -> tuple[int, str, str]:
    """Start a thread holding SECRET in its env with the plain `temporal` CLI."""
    start = {
        "agent": "api_agent",
        "messages": [{"role": "user", "content": "hi"}],
        "env": {"API_TOKEN": SECRET},
    }
    return await temporal_cli(
        address,
        "workflow",
        "start",
        "--type",
        "AgentThread",
        "--task-queue",
        task_queue,
        "--workflow-id",
        thread_id,
        "--input",
        json.dumps(start),
        *extra,
    )


async def _run_secret_thread(start_worker, weft_config, dev_server, scripted_server):
    keys = f"k1:{new_key()}"
    weft_config.codec.keys = keys
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "call_api", "arguments": {"endpoint": "/v1/items"}}]},
                {"text": "Done."},
            ]
        },
    )
    worker = await start_worker(_definitions(script))
    client = await connect(dev_server.address, keyring=parse_keys([keys], source="test"))
    handle = await start_thread(
        client,
        worker.task_queue,
        agent="api_agent",
        messages=[{"role": "user", "content": "list the items"}],
        env={"API_TOKEN": SECRET, "CITY": {"value": TEXT_VALUE, "type": "text"}},
    )
    await wait_until(handle, idle_after(1))
    return worker, handle, script, keys


async def test_history_holds_no_plaintext_secret(
    start_worker, weft_config, dev_server, scripted_server
):
    """The full history JSON never holds the secret, and decodes through the codec server."""
    worker, handle, _script, keys = await _run_secret_thread(
        start_worker, weft_config, dev_server, scripted_server
    )
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert json.loads(tool.content)["result"]["authorised"] is True  # the tool got the secret

    code, raw, err = await temporal_cli(
        dev_server.address, "workflow", "show", "--workflow-id", handle.id, "--output", "json"
    )
    assert code == 0, err
    raw_texts = json_texts(json.loads(raw))
    assert not any(SECRET in t or AGENT_SECRET in t for t in raw_texts)
    assert not any(TEXT_VALUE in t for t in raw_texts)  # the whole start input is sealed
    assert any("binary/encrypted" in t for t in raw_texts)
    history = await handle.fetch_history()
    assert SECRET not in history.to_json()

    codec = EncryptionCodec(parse_keys([keys], source="test"))
    with CodecServer(codec, token="t0ken", allow_origin="http://ui.test", port=0) as server:
        code, decoded, err = await temporal_cli(
            dev_server.address,
            "workflow",
            "show",
            "--workflow-id",
            handle.id,
            "--output",
            "json",
            "--codec-endpoint",
            server.url,
            "--codec-auth",
            "Bearer t0ken",
        )
    assert code == 0, err
    decoded_texts = json_texts(json.loads(decoded))
    assert any(TEXT_VALUE in t for t in decoded_texts)
    assert any(AGENT_SECRET in t for t in decoded_texts)  # thread.init's result, decoded
    assert not any("binary/encrypted" in t for t in decoded_texts)


async def test_store_holds_no_plaintext_env(
    start_worker: StartWorker,
    weft_config: WeftConfig,
    dev_server: DevServer,
    scripted_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    """Thread env and env-carrying snapshots are sealed; the database files hold no secret."""
    worker, handle, _script, _keys = await _run_secret_thread(
        start_worker, weft_config, dev_server, scripted_server
    )
    with worker.store.engine.connect() as connection:
        column = connection.scalar(
            text("SELECT env FROM threads WHERE thread_id = :id"), {"id": handle.id}
        )
    assert SECRET not in str(column) and TEXT_VALUE not in str(column)
    assert "$weftEncrypted" in str(column)
    files = list(tmp_path.glob("weft.db*"))
    assert files
    for file in files:
        assert SECRET.encode() not in file.read_bytes(), file
        assert AGENT_SECRET.encode() not in file.read_bytes(), file
    row = worker.store.threads.get(handle.id)
    assert row is not None and row.env["API_TOKEN"] == SECRET


async def test_model_never_sees_the_secret(start_worker, weft_config, dev_server, scripted_server):
    """Every model request shows the secret as a placeholder and the text value as itself."""
    _worker, _handle, script, _keys = await _run_secret_thread(
        start_worker, weft_config, dev_server, scripted_server
    )
    requests = [r for r in scripted_server.requests if r["model"] == script]
    assert len(requests) == 2
    dumped = json.dumps(requests)
    assert SECRET not in dumped and AGENT_SECRET not in dumped
    system = requests[0]["messages"][0]["content"]
    assert "[env API_TOKEN is secret]" in system and TEXT_VALUE in system


async def test_plain_json_start_and_query_still_work(
    start_worker, weft_config, dev_server, scripted_server
):
    """With keys configured, plain JSON from the temporal CLI starts a thread and queries read."""
    weft_config.codec.keys = f"k1:{new_key()}"
    script = add_script(scripted_server, {"replies": [{"text": "Hello."}]})
    worker = await start_worker(_definitions(script))
    thread_id = f"thread-plain-{worker.task_queue}"
    code, _out, err = await _cli_start(dev_server.address, worker.task_queue, thread_id)
    assert code == 0, err
    client = await connect(dev_server.address)
    handle = client.get_workflow_handle(thread_id)
    await wait_until(handle, idle_after(1))
    code, out, err = await temporal_cli(
        dev_server.address, "workflow", "query", "--workflow-id", thread_id, "--type", "thread_read"
    )
    assert code == 0, err
    assert '"waiting_input"' in out
    # The plaintext start input stays as sent, but weft's own copy (thread.init) is sealed.
    code, raw, err = await temporal_cli(
        dev_server.address, "workflow", "show", "--workflow-id", thread_id, "--output", "json"
    )
    events = json.loads(raw)["events"]
    scheduled = [e for e in events if e.get("eventType") == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"]
    init = next(e for e in scheduled if "thread.init" in json.dumps(e))
    assert SECRET not in "".join(json_texts(init))
    assert "binary/encrypted" in "".join(json_texts(init))


async def test_cli_start_through_the_codec_server_is_encrypted(
    start_worker, weft_config, dev_server, scripted_server
):
    """`temporal workflow start --codec-endpoint` seals the input; the thread runs on it."""
    keys = f"k1:{new_key()}"
    weft_config.codec.keys = keys
    script = add_script(scripted_server, {"replies": [{"text": "Hello."}]})
    worker = await start_worker(_definitions(script))
    thread_id = f"thread-codec-{worker.task_queue}"
    codec = EncryptionCodec(parse_keys([keys], source="test"))
    with CodecServer(codec, token="t0ken", allow_origin="http://ui.test", port=0) as server:
        code, _out, err = await _cli_start(
            dev_server.address,
            worker.task_queue,
            thread_id,
            "--codec-endpoint",
            server.url,
            "--codec-auth",
            "Bearer t0ken",
        )
    assert code == 0, err
    handle = (await connect(dev_server.address)).get_workflow_handle(thread_id)
    await wait_until(handle, idle_after(1))
    code, raw, err = await temporal_cli(
        dev_server.address, "workflow", "show", "--workflow-id", thread_id, "--output", "json"
    )
    assert code == 0, err
    texts = json_texts(json.loads(raw))
    assert not any(SECRET in t for t in texts)
    stored = store_of(worker).threads.get(thread_id)
    assert stored is not None and stored.env == {"API_TOKEN": SECRET}


async def test_worker_without_the_key_fails_the_task_naming_the_key(
    start_worker, weft_config, dev_server, scripted_server
):
    """A worker lacking the start input's key records a workflow task failure naming it."""
    weft_config.codec.keys = f"other:{new_key()}"
    script = add_script(scripted_server, {"replies": [{"text": "Hello."}]})
    worker = await start_worker(_definitions(script))
    client = await connect(dev_server.address, keyring=parse_keys([f"k1:{new_key()}"], source="t"))
    handle = await start_thread(
        client, worker.task_queue, agent="api_agent", env={"API_TOKEN": SECRET}
    )
    deadline = asyncio.get_running_loop().time() + 30
    failures: list[str] = []
    while not failures:
        assert asyncio.get_running_loop().time() < deadline, "no workflow task failure recorded"
        await asyncio.sleep(0.1)
        history = await handle.fetch_history()
        failures = [
            e.workflow_task_failed_event_attributes.failure.message
            for e in history.events
            if e.HasField("workflow_task_failed_event_attributes")
        ]
    assert "key 'k1', which is not configured (configured: other)" in failures[0]
    await handle.terminate()
