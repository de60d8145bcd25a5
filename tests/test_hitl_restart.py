"""A thread waiting for approval survives its worker's death and is answered by the CLI.

Its pending action and its queue are rebuilt from history by the next worker.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import yaml
from support import idle_after, read, start_thread, temporal_cli, wait_until
from worker_process import crash_drill

DEFINITIONS = Path(__file__).parent / "hitl_definitions"


def _config(tmp_path: Path, address: str) -> Path:
    config = {
        "temporal": {"address": address, "taskQueue": f"hitl-{uuid.uuid4().hex[:8]}"},
        "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
        "definitions": str(DEFINITIONS),
        "providers": {"scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}},
    }
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_cli_approval_after_worker_restart(tmp_path, dev_server, temporal_client):
    """The worker is SIGKILLed while the thread waits; after a restart the CLI approves it."""
    config_file = _config(tmp_path, dev_server.address)
    async with crash_drill(config_file) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="hitl_agent",
            messages=[{"role": "user", "content": "write it down"}],
        )
        waiting = await wait_until(handle, lambda s: bool(s.pending_actions), timeout=60)
        assert waiting.status == "waiting_permission"
        action_id = waiting.pending_actions[0]["actionId"]
        query = f"WorkflowId = '{handle.id}' AND WeftAwaitingAction = 'tool_permission'"
        for _ in range(100):  # visibility is eventually consistent
            code, out, err = await temporal_cli(
                dev_server.address, "workflow", "list", "--query", query, "-o", "json"
            )
            assert code == 0, err
            if handle.id in out:
                break
            await asyncio.sleep(0.1)
        assert handle.id in out, "the waiting thread is not listed by WeftAwaitingAction"
        await temporal_client.get_workflow_handle(handle.id).signal(
            "queue_message", {"role": "user", "content": "and one more thing"}
        )
        queued = (await wait_until(handle, lambda s: len(s.queue) == 1)).queue
        await first.kill()
        await second.start()
        # The new worker rebuilt the thread from history: same action, same queue.
        rebuilt = await read(handle)
        assert rebuilt.queue == queued and rebuilt.pending_actions == waiting.pending_actions
        code, out, err = await temporal_cli(
            dev_server.address,
            "workflow",
            "signal",
            "--workflow-id",
            handle.id,
            "--name",
            "respond_action",
            "--input",
            json.dumps({"actionId": action_id, "decision": "approve"}),
        )
        assert code == 0, err
        state = await wait_until(handle, idle_after(1), timeout=90)
        assert state.pending_actions == [] and state.stop_reason == "stop_on_response"
        assert store.values.get(handle.id, "runs") == 1
        messages = store.messages.list(handle.id)
        # The queued message was injected before the next model call, after the tool ran.
        assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
        assert messages[-1].content == "Noted, and the extra request too."
        events = store.events.read(handle.id, limit=10_000)
        resolved = [e.payload for e in events if e.type == "permission.resolved"]
        assert resolved == [
            {"toolName": "careful_note", "decision": "allow", "decidedBy": "human", "scope": "once"}
        ]
        assert (await read(handle)).warnings == 0
    await handle.signal("terminate", {})
