"""`weft serve` and `weft worker` as real processes on the dev server: a client that speaks
only HTTP starts a thread, follows it over Server-Sent Events, steers it and ends it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from api_support import sse

from weft.workers.dev_server import DevServer, free_port

DEFINITIONS = Path(__file__).parent / "crash_definitions"
TOKEN = "serve-process-token"
WEFT = str(Path(sys.executable).parent / "weft")


def _config(tmp_path: Path, address: str, task_queue: str) -> Path:
    path = tmp_path / "serve.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": address, "taskQueue": task_queue},
                "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
                "definitions": str(DEFINITIONS),
                "providers": {
                    "scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}
                },
            }
        )
    )
    return path


@asynccontextmanager
async def _process(*args: str, ready: str) -> AsyncIterator[str]:
    """Run `weft ARGS` until the test ends; yields its first line containing `ready`."""
    process = await asyncio.create_subprocess_exec(
        WEFT,
        *args,
        env={**os.environ, "WEFT_GATEWAY_TOKEN": TOKEN},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        while True:
            line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
            assert line, f"weft {args[2]} exited: {''.join(seen)}"
            seen.append(line)
            if ready in line:
                break
        yield line
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, "".join(seen) + output.decode()


async def test_a_thread_over_http_from_start_to_end(tmp_path: Path, dev_server: DevServer) -> None:
    config = str(_config(tmp_path, dev_server.address, f"serve-{uuid.uuid4().hex[:8]}"))
    port = free_port()
    async with (
        _process("--config", config, "worker", ready="polling"),
        _process("--config", config, "serve", "--port", str(port), ready="inbox page"),
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        ) as http,
    ):
        probe = http.build_request("GET", "/healthz")
        del probe.headers["Authorization"]  # the one route open without the token
        health = await http.send(probe)
        assert health.status_code == 200, health.text

        refused = await http.post("/threads", json={"agent": "nobody"})
        assert refused.status_code == 422, refused.text
        assert "nobody" in refused.json()["error"]

        key = {"Idempotency-Key": f"start-{uuid.uuid4()}"}
        body = {"agent": "crash_agent", "messages": ["chat: hello"]}
        started = await http.post("/threads", json=body, headers=key)
        assert started.status_code == 201, started.text
        thread_id = started.json()["threadId"]
        assert started.json()["confirmed"] is True
        again = await http.post("/threads", json=body, headers=key)
        assert again.json()["threadId"] == thread_id
        assert again.headers.get("idempotent-replayed") == "true"

        async with sse(http, thread_id) as stream:
            assert stream.response.headers["content-type"].startswith("text/event-stream")
            await stream.read_until(_is("turn.completed"))
            queued = await http.post(
                f"/threads/{thread_id}/messages",
                json={"content": "chat: and again"},
                headers={"Idempotency-Key": f"send-{uuid.uuid4()}"},
            )
            assert queued.status_code == 202, queued.text
            await stream.read_until(_is("turn.completed"))
            ended = await http.post(f"/threads/{thread_id}/terminate", json={"reason": "done"})
            assert ended.status_code == 202, ended.text
            await stream.read_until(_is("end"))
        received = stream.events()

        sequences = [int(event["id"]) for event in received]
        assert sequences == list(range(1, len(sequences) + 1)), "gapless, once, in order"
        texts = [
            json.loads(event["data"])["payload"].get("text", "")
            for event in received
            if event.get("event") == "model.delta"
        ]
        assert "chatting" in "".join(texts)
        assert sum(event.get("event") == "turn.completed" for event in received) == 2

        late = await http.post(f"/threads/{thread_id}/messages", json={"content": "chat: late"})
        assert late.status_code == 409, late.text
        unknown = await http.get("/threads/no-such-thread")
        assert unknown.status_code == 404


def _is(event_type: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("event") == event_type
