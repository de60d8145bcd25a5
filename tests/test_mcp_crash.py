"""A worker killed with SIGKILL in the middle of an MCP call.

Workers run as real `weft worker` subprocesses on a definitions folder written here, whose
MCP server is the stdio test server (tests/mcp_servers/tools_server.py): Temporal retries
the call on a fresh worker, and a call whose retries are spent is an honest
`outcome_unknown` result, never a stuck thread.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import yaml
from mcp_support import SERVER_SCRIPT
from support import idle_after, start_thread, wait_until
from worker_process import WorkerProcess

from weft.store import Store

SCRIPT = {
    "mcp_crash": {
        "replies": [
            {"tool_calls": [{"name": "slow", "arguments": {"seconds": 3}}]},
            {"text": "The slow call is over."},
        ]
    }
}


def _definitions(root: Path) -> Path:
    files = {
        "models/mcpy.yaml": {"provider": "scripted", "model": "mcp_crash"},
        "prompts/mcp_prompt.yaml": {
            "toolDescription": "uses MCP",
            "prompt": "You use MCP tools.",
            "model": "mcpy",
            "tools": ["tools.slow"],
        },
        "agents/mcp_agent.yaml": {"sideA": {"prompt": "mcp_prompt"}},
        "mcp/tools.yaml": {"command": "python", "args": [str(SERVER_SCRIPT)]},
        "scripts/mcp_crash.yaml": SCRIPT,
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(content))
    return root


def _config(tmp_path: Path, address: str) -> tuple[Path, str, str]:
    definitions = _definitions(tmp_path / "definitions")
    task_queue, store_url = f"mcp-crash-{uuid.uuid4().hex[:8]}", f"sqlite:///{tmp_path / 'w.db'}"
    config = {
        "temporal": {"address": address, "taskQueue": task_queue},
        "store": {"url": store_url},
        "definitions": str(definitions),
        "providers": {"scripted": {"kind": "scripted", "scripts": str(definitions / "scripts")}},
    }
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump(config))
    return path, task_queue, store_url


async def _slow_started(store: Store, *thread_ids: str) -> None:
    for _ in range(600):
        started = [store.events.read(t, types=["tool.started"]) for t in thread_ids]
        if all(any(e.payload.get("name") == "slow" for e in s) for s in started):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the MCP call never started in {thread_ids}")


async def test_a_worker_killed_mid_mcp_call(tmp_path, dev_server, temporal_client):
    """Killed during two MCP calls: the one with retries left runs again on a fresh worker
    and succeeds; the one without is stored as outcome unknown; both turns end."""
    config_file, task_queue, store_url = _config(tmp_path, dev_server.address)
    first, second = WorkerProcess(config_file), WorkerProcess(config_file)
    await first.start()
    store = Store.open(store_url)
    try:
        options = {"heartbeatTimeoutSeconds": 2}
        retried = await start_thread(
            temporal_client,
            task_queue,
            agent="mcp_agent",
            options=options,
            messages=[{"role": "user", "content": "go slowly"}],
        )
        spent = await start_thread(
            temporal_client,
            task_queue,
            agent="mcp_agent",
            options={**options, "toolMaxAttempts": 1},
            messages=[{"role": "user", "content": "go slowly"}],
        )
        await _slow_started(store, retried.id, spent.id)
        await first.kill()
        await second.start()
        for handle in (retried, spent):
            state = await wait_until(handle, idle_after(1), timeout=90)
            assert state.stop_reason == "stop_on_response"

        def tool_result(thread_id: str) -> str:
            (message,) = [m for m in store.messages.list(thread_id) if m.role == "tool"]
            return message.content or ""

        assert '"result":"slept 3 s"' in tool_result(retried.id)
        attempts = [
            e.payload["attempt"] for e in store.events.read(retried.id, types=["tool.started"])
        ]
        assert attempts == [1, 2]
        unknown = tool_result(spent.id)
        assert '"error_code":"outcome_unknown"' in unknown and "may or may not" in unknown
        for handle in (retried, spent):
            await handle.signal("terminate", {})
    finally:
        store.close()
        await first.stop()
        await second.stop()
