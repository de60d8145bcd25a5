"""`weft thread start / send / show / tail` as real subprocesses against a running worker."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from support import add_script, agent_definitions, assert_preview_of, idle_after, wait_until

from weft.workers.config import WeftConfig


def _cli_config(tmp_path: Path, weft_config: WeftConfig, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address, "taskQueue": task_queue},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    return path


async def _weft(config: Path, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_tail_streams_deltas_live(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft thread tail --json` prints model.delta events while the reply is streaming."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "text": "one two three four five six seven eight nine ten",
                    "chunk_size": 4,
                    "chunk_delay_ms": 300,
                }
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    # The message goes once the tail prints the thread's first event: a slow start of the
    # `weft` process on a loaded machine must not let the reply end before it watches.
    thread_id = (await _weft(config, "thread", "start", "helper")).strip()
    tail = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        "thread",
        "tail",
        thread_id,
        "--json",
        stdout=asyncio.subprocess.PIPE,
    )
    assert tail.stdout is not None
    arrivals: list[dict[str, Any]] = []
    completed_when_first_delta_shown: list[object] | None = None
    try:
        arrivals.append(json.loads(await asyncio.wait_for(tail.stdout.readline(), 60)))
        await _weft(config, "thread", "send", thread_id, "count")
        while True:
            line = await asyncio.wait_for(tail.stdout.readline(), 30)
            event = json.loads(line)
            arrivals.append(event)
            if event["type"] == "model.delta" and completed_when_first_delta_shown is None:
                # Live means: the tail printed text while the reply was still streaming.
                completed_when_first_delta_shown = worker.store.events.read(
                    thread_id, types=["model.completed"]
                )
            if event["type"] == "model.completed":
                break
    finally:
        tail.terminate()
        await tail.wait()
    deltas = [e for e in arrivals if e["type"] == "model.delta"]
    assert len(deltas) >= 3, "the reply did not arrive in several batches"
    assert completed_when_first_delta_shown == [], "text was shown only after the reply ended"
    text = "".join(e["payload"]["text"] for e in deltas)
    assert text == "one two three four five six seven eight nine ten"
    sequences = [e["sequence"] for e in arrivals]
    assert sequences == sorted(sequences)


async def test_send_and_show(start_worker, temporal_client, scripted_server, weft_config, tmp_path):
    """`weft thread send` queues a message and `weft thread show` prints the read model."""
    script = add_script(scripted_server, {"replies": [{"text": "pong"}]})
    worker = await start_worker(agent_definitions(script))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    thread_id = (await _weft(config, "thread", "start", "helper")).strip()
    await _weft(config, "thread", "send", thread_id, "ping")
    await wait_until(temporal_client.get_workflow_handle(thread_id), idle_after(1))
    shown = json.loads(await _weft(config, "thread", "show", thread_id))
    assert shown["status"] == "waiting_input" and shown["lastOutcome"] == "pong"
    for _ in range(100):  # visibility is eventually consistent
        listed = await _weft(
            config,
            "thread",
            "list",
            "--agent",
            "helper",
            "--status",
            "waiting_input",
            "--limit",
            "500",
        )
        if thread_id in listed:
            break
        await asyncio.sleep(0.1)
    assert f"{thread_id}\thelper\twaiting_input" in listed
    await _weft(config, "thread", "terminate", thread_id, "--reason", "done")
    result = await temporal_client.get_workflow_handle(thread_id).result()
    assert result["status"] == "cancelled"


async def test_send_spills_large_content_through_the_store(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft thread send` with content over 64 KiB uploads it as a blob; the store keeps it
    whole, the signal carries only a preview, and so does the model's request."""
    script = add_script(scripted_server, {"replies": [{"text": "read it"}]})
    worker = await start_worker(agent_definitions(script))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    thread_id = (await _weft(config, "thread", "start", "helper")).strip()
    content = "".join(f"line {i:06d} of a long paste\n" for i in range(4000))  # ~104 KB
    await _weft(config, "thread", "send", thread_id, content)
    handle = temporal_client.get_workflow_handle(thread_id)
    await wait_until(handle, idle_after(1))
    [stored] = [m for m in worker.store.messages.list(thread_id) if m.role == "user"]
    assert stored.content == content and stored.metadata["contentRef"].startswith("blob:")
    [request] = [r for r in scripted_server.requests if r["model"] == script]
    assert_preview_of(request["messages"][-1]["content"], content)  # the model pages the rest
    history = await handle.fetch_history()
    assert max(len(e.SerializeToString()) for e in history.events) < 16 * 1024
