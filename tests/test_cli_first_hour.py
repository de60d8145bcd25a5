"""Issue #34, the first hour with the `weft` command: tail ends with its thread, one status
vocabulary for `weft thread list` and `GET /threads`, every change says what it did, and
every error is one line naming its flag. Real subprocesses against a running worker."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_support import api_stack
from support import add_script, agent_definitions, idle_after, start_thread, wait_until

from weft.client.thread_status import STATUS_FILTERS
from weft.workers.config import WeftConfig

WEFT = str(Path(sys.executable).parent / "weft")
BOUND = 60  # seconds any one fact may take to show


async def _weft(config: Path | None, *args: str) -> tuple[int, str, str]:
    where = ["--config", str(config)] if config is not None else []
    process = await asyncio.create_subprocess_exec(
        WEFT,
        *where,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), BOUND)
    return process.returncode or 0, out.decode(), err.decode()


def _config(tmp_path: Path, weft_config: WeftConfig, task_queue: str) -> Path:
    path = tmp_path / f"cli-{task_queue}.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


def _one_line(result: tuple[int, str, str], code: int, *expected: str) -> str:
    """Exit `code` with one `weft:` line on stderr holding `expected`, and no traceback."""
    got, _, err = result
    assert got == code and "Traceback" not in err, (got, err)
    [line] = err.strip().splitlines()
    assert line.startswith("weft: ") and all(part in line for part in expected), line
    return line


async def _listed(config: Path, status: str, thread_id: str) -> str:
    """The `weft thread list --status` row of `thread_id`, once visibility shows it."""
    for _ in range(BOUND * 10):  # visibility is eventually consistent
        code, out, err = await _weft(config, "thread", "list", "--status", status)
        assert code == 0, err
        row = next((r for r in out.splitlines() if r.startswith(thread_id + "\t")), None)
        if row is not None:
            return row
        await asyncio.sleep(0.1)
    raise AssertionError(f"{thread_id} never listed as {status}")


async def test_tail_exits_when_the_thread_closes(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft thread tail` exits 0 with one line saying how the thread ended once it closes,
    at once for a thread closed before it started, and says `failed` for a refused start."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hi"}]}))
    )
    config = _config(tmp_path, weft_config, worker.task_queue)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    await wait_until(handle, idle_after(1))
    tail = await asyncio.create_subprocess_exec(
        WEFT,
        "--config",
        str(config),
        "thread",
        "tail",
        handle.id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert tail.stdout is not None
    try:
        # Following: it has printed the reply, and is still running.
        line = await asyncio.wait_for(tail.stdout.readline(), BOUND)
        while "assistant: hi" not in line.decode():
            line = await asyncio.wait_for(tail.stdout.readline(), BOUND)
        assert tail.returncode is None
        code, out, err = await _weft(config, "thread", "terminate", handle.id)
        assert code == 0 and out.startswith(f"terminate sent to {handle.id}"), err
        out_rest, err_rest = await asyncio.wait_for(tail.communicate(), BOUND)
    finally:
        if tail.returncode is None:
            tail.kill()
            await tail.wait()
    assert tail.returncode == 0, err_rest
    assert out_rest.decode().splitlines()[-1] == f"thread {handle.id} ended (terminated)"

    # Already closed when the tail starts: the whole log, then the same last line.
    code, out, err = await _weft(config, "thread", "tail", handle.id)
    assert code == 0, err
    lines = out.splitlines()
    assert "assistant: hi" in lines and lines[-1] == f"thread {handle.id} ended (terminated)"

    refused = await start_thread(temporal_client, worker.task_queue, agent="nobody")
    code, out, err = await _weft(config, "thread", "tail", refused.id)
    assert code == 0 and out.splitlines()[-1] == f"thread {refused.id} ended (failed)", err


@pytest.mark.timeout(360)  # about 30 s: a dozen `weft` processes, each seconds under load
async def test_one_status_vocabulary_for_cli_and_http(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft thread list --status` and `GET /threads?status=` take the same values and list
    the same threads with the same status; a bad value is refused naming `status`, and a
    closed thread is described alike by the CLI and the HTTP 409."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hi"}]}))
    )
    config = _config(tmp_path, weft_config, worker.task_queue)
    session = f"s-{uuid.uuid4().hex[:8]}"
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "hello"}],
        sessionId=session,
    )
    await wait_until(handle, idle_after(1))

    code, out, err = await _weft(config, "thread", "list", "--help")
    assert code == 0 and all(value in out for value in STATUS_FILTERS), out
    bogus = _one_line(
        await _weft(config, "thread", "list", "--status", "bogus"), 2, "--status", "'bogus'"
    )
    assert all(value in bogus for value in STATUS_FILTERS), bogus

    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:

        async def http_listed(status: str) -> dict[str, Any] | None:
            params = {"session": session, "status": status}
            reply = await stack.http.get("/threads", params=params)
            assert reply.status_code == 200, reply.text
            return next((t for t in reply.json()["threads"] if t["threadId"] == handle.id), None)

        for status in STATUS_FILTERS:  # every value is a query visibility accepts
            code, _, err = await _weft(config, "thread", "list", "--status", status)
            assert code == 0, (status, err)
            reply = await stack.http.get("/threads", params={"status": status})
            assert reply.status_code == 200, (status, reply.text)
        refused = await stack.http.get("/threads", params={"status": "bogus"})
        assert refused.status_code == 422 and refused.json()["fields"] == ["query.status"]
        assert "running" in refused.json()["error"] and "terminated" in refused.json()["error"]

        # Idle: listed as running (every open thread) and as what it does, waiting_input.
        row = await _listed(config, "running", handle.id)
        assert row.split("\t")[1:3] == ["helper", "waiting_input"], row
        assert await _listed(config, "waiting_input", handle.id) == row
        assert (await http_listed("running") or {}).get("status") == "waiting_input"
        assert (await http_listed("waiting_input") or {}).get("status") == "waiting_input"

        # No worker polls this queue: the thread has no WeftStatus yet, and is preparing.
        unserved_queue = f"unserved-{uuid.uuid4().hex[:8]}"
        unserved = await start_thread(temporal_client, unserved_queue)
        unserved_config = _config(tmp_path, weft_config, unserved_queue)
        row = await _listed(unserved_config, "preparing", unserved.id)
        assert row.split("\t")[2] == "preparing", row
        await unserved.terminate()

        await _weft(config, "thread", "terminate", handle.id)
        await handle.result()
        row = await _listed(config, "terminated", handle.id)
        assert row.split("\t")[2] == "terminated", row
        assert await _listed(config, "closed", handle.id) == row
        for status in ("terminated", "closed"):
            listed = await http_listed(status)
            assert listed is not None and listed["status"] == "terminated", status

        cli_line = _one_line(await _weft(config, "thread", "send", handle.id, "more"), 1)
        closed = await stack.http.post(f"/threads/{handle.id}/messages", json={"content": "x"})
        assert closed.status_code == 409, closed.text
        assert cli_line == f"weft: {closed.json()['error']}"
        assert closed.json()["error"] == f"thread '{handle.id}' is closed (terminated)"


async def test_changes_say_what_they_did(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`send`, `terminate` and a budget set each print one line saying what they did."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hi"}]}))
    )
    config = _config(tmp_path, weft_config, worker.task_queue)
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")

    code, out, err = await _weft(config, "thread", "send", handle.id, "ping")
    assert code == 0 and out == f"queued a user message on {handle.id} (4 characters)\n", err
    await wait_until(handle, idle_after(1))
    code, out, err = await _weft(config, "thread", "budget", handle.id, "--max-tokens", "900")
    assert code == 0, err
    assert out == f"budget of the tree of {handle.id} set: maxTokens 900\n", out
    code, out, err = await _weft(config, "thread", "terminate", handle.id, "--reason", "done")
    assert code == 0 and len(out.splitlines()) == 1 and handle.id in out, err
    assert (await handle.result())["status"] == "cancelled"


async def test_errors_are_one_line_naming_the_flag(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Malformed `--args`, a `--in` past the limit and bad values of other flags are one
    line naming the flag (exit 2); an unexpected failure is one line, its traceback only
    with `--debug`."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hi"}]}))
    )
    config = _config(tmp_path, weft_config, worker.task_queue)
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    effect = ("thread", "schedule-effect", handle.id, "remind")
    _one_line(await _weft(config, *effect, "--args", "{not json"), 2, "--args", "not JSON")
    _one_line(await _weft(config, *effect, "--in", "4000d"), 2, "--in", "3650 days", "4000d")
    _one_line(await _weft(config, "thread", "list", "--limit", "0"), 2, "--limit")
    _one_line(await _weft(config, "thread", "nope"), 2, "'nope'")
    await handle.signal("terminate", {})

    # Nothing listens there: connecting fails.
    nowhere = tmp_path / "nowhere.yml"
    nowhere.write_text(yaml.safe_dump({"temporal": {"address": "127.0.0.1:9"}}))
    _one_line(await _weft(nowhere, "thread", "list"), 1)
    code, _, err = await _weft(nowhere, "--debug", "thread", "list")
    assert code == 1 and "Traceback" in err and err.strip().splitlines()[-1].startswith("weft: ")
