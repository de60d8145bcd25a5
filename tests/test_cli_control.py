"""The control plane from the `weft` command, as real subprocesses against a running worker:
answering a thread that waits (`thread respond`), finding such threads (`inbox`), sending
large messages by file or stdin, refused starts, and one line (no traceback) for an unknown
or closed thread."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import yaml
from support import add_script, agent_definitions, idle_after, read, start_thread, wait_until

from weft.workers.config import WeftConfig

# The weather question asks for a tool that waits for permission; any other message (the
# pasted files) gets a short reply.
PERMISSION_THEN_REPLIES = {
    "turns": [
        {
            "match": "weather",
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "Sunny in Oslo."},
            ],
        },
        {"match": "*", "replies": [{"text": "read it"}]},
    ]
}


async def _weft(config: Path, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin)
    return process.returncode or 0, out.decode(), err.decode()


def _one_line_error(result: tuple[int, str, str], *expected: str) -> None:
    """Exit 1 with one `weft:` line on stderr that says `expected`, and no traceback."""
    code, _, err = result
    assert code == 1 and "Traceback" not in err, err
    [line] = err.strip().splitlines()
    assert line.startswith("weft: ") and all(part in line for part in expected), line


def _cli_config(tmp_path: Path, weft_config: WeftConfig, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


async def test_unknown_threads_and_agents_are_one_line(
    start_worker, scripted_server, weft_config, tmp_path
):
    """Every thread command on an unknown thread says so in one line and exits 1; a start
    of an unknown agent exits non-zero with the worker's reason."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hi"}]}))
    )
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    commands = [
        ("send", "nope-thread", "hello"),
        ("respond", "nope-thread", "act_x", "approve"),
        ("terminate", "nope-thread"),
        ("show", "nope-thread"),
        ("tail", "nope-thread"),
        ("ask", "nope-thread", "hi"),
        ("compact", "nope-thread"),
        ("context", "nope-thread"),
        ("effects", "nope-thread"),
        ("budget", "nope-thread"),
    ]
    results = await asyncio.gather(
        *(_weft(config, "thread", *command) for command in commands),
        _weft(config, "thread", "start", "nobody", "-m", "hi"),
    )
    for command, result in zip(commands, results, strict=False):
        assert result[0] == 1, command
        _one_line_error(result, "thread 'nope-thread' not found")
    code, out, err = results[-1]
    assert code != 0 and "Traceback" not in err, err
    assert "unknown agent" in err and "'nobody'" in err, err


async def test_respond_inbox_send_and_tail(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A thread waiting for a tool permission is in the inbox; a wrong answer is refused with
    the reason; approve runs the tool. Large messages go by file and stdin whole, tail shows
    the user's messages, and a terminated thread refuses what acts but still shows."""
    script = add_script(scripted_server, PERMISSION_THEN_REPLIES)
    worker = await start_worker(agent_definitions(script, permissions={"mode": "default"}))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    code, out, err = await _weft(config, "thread", "start", "helper", "-m", "weather in Oslo?")
    assert code == 0 and err == "", err
    thread_id = out.strip()
    handle = temporal_client.get_workflow_handle(thread_id)
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    [action] = state.pending_actions
    action_id = action["actionId"]

    for _ in range(100):  # visibility is eventually consistent
        code, listed, err = await _weft(config, "inbox", "--kind", "tool_permission")
        if thread_id in listed:
            break
        await asyncio.sleep(0.2)
    assert code == 0, err
    [line] = [row for row in listed.splitlines() if row.startswith(thread_id)]
    assert line.split("\t") == [
        thread_id,
        "helper",
        "tool_permission",
        action_id,
        'weather({"city": "Oslo"})',
    ]
    inbox, questions, wrong_id, wrong_decision = await asyncio.gather(
        _weft(config, "inbox", "--json", "--agent", "helper"),
        _weft(config, "inbox", "--kind", "ask_human"),
        _weft(config, "thread", "respond", thread_id, "act_nope", "approve"),
        _weft(config, "thread", "respond", thread_id, action_id, "answer", "--answer", "yes"),
    )
    [listed_json] = [t for t in json.loads(inbox[1]) if t["threadId"] == thread_id]
    assert listed_json["pendingActions"][0]["toolName"] == "weather"
    assert thread_id not in questions[1]
    _one_line_error(wrong_id, "refused", "no pending action 'act_nope'")
    _one_line_error(wrong_decision, "refused", "answer")

    code, out, err = await _weft(config, "thread", "respond", thread_id, action_id, "approve")
    assert code == 0 and out.strip() == f"approved {action_id} on {thread_id}", err
    await wait_until(handle, idle_after(1))
    tool = next(m for m in worker.store.messages.list(thread_id) if m.role == "tool")
    assert tool.tool_status == "success" and "sunny" in (tool.content or "")

    # Over one argv string's 128 KiB: by file, then by stdin.
    from_file = "".join(f"file line {i:06d} of a long paste\n" for i in range(6000))
    from_stdin = "".join(f"stdin line {i:06d} of a long paste\n" for i in range(6000))
    assert len(from_file) > 128 * 1024 and len(from_stdin) > 128 * 1024
    paste = tmp_path / "paste.txt"
    paste.write_text(from_file)
    code, _, err = await _weft(config, "thread", "send", thread_id, "--file", str(paste))
    assert code == 0, err
    await wait_until(handle, idle_after(2))
    code, _, err = await _weft(config, "thread", "send", thread_id, "-", stdin=from_stdin.encode())
    assert code == 0, err
    await wait_until(handle, idle_after(3))
    users = [m for m in worker.store.messages.list(thread_id) if m.role == "user"]
    assert [m.content for m in users] == ["weather in Oslo?", from_file, from_stdin]
    assert all(m.metadata["contentRef"].startswith("blob:") for m in users[1:])

    code, tail, err = await _weft(config, "thread", "tail", thread_id, "--no-follow")
    assert code == 0, err
    lines = tail.splitlines()
    assert "user: weather in Oslo?" in lines
    assert any(line.startswith("user: file line 000000") for line in lines)
    assert any(line.startswith("user: stdin line 000000") for line in lines)
    assert lines.index("user: weather in Oslo?") < lines.index("assistant: Sunny in Oslo.")
    assert f"  ? waiting on a human (tool_permission {action_id}): {action['prompt']}" in lines

    code, _, err = await _weft(config, "thread", "terminate", thread_id)
    assert code == 0, err
    await handle.result()
    _one_line_error(
        await _weft(config, "thread", "send", thread_id, "more"),
        f"thread '{thread_id}' is closed (terminated)",
    )
    code, shown, err = await _weft(config, "thread", "show", thread_id)
    assert code == 0 and json.loads(shown)["status"] == "cancelled", err
    code, tail, err = await _weft(config, "thread", "tail", thread_id, "--no-follow")
    assert code == 0 and "user: weather in Oslo?" in tail, err
    assert (await read(handle)).status == "cancelled"


async def test_thread_budget_shows_sets_and_refuses(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft thread budget` prints the tree's budget, refuses a bad limit with exit 2 and
    its flag's name, and sets new limits on the root."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hi"}]}))
    )
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "hello"}],
        options={"budget": {"maxModelCalls": 4}},
    )
    await wait_until(handle, idle_after(1))
    code, out, err = await _weft(config, "thread", "budget", handle.id)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["limits"] == {"maxModelCalls": 4} and shown["spent"]["modelCalls"] == 1

    code, out, err = await _weft(config, "thread", "budget", handle.id, "--max-tokens", "0")
    assert code == 2 and "--max-tokens" in err and "Traceback" not in err, err

    code, out, err = await _weft(
        config,
        "thread",
        "budget",
        handle.id,
        "--max-tokens",
        "900",
        "--clear",
        "modelCalls",
        "--json",
    )
    assert code == 0, err
    assert json.loads(out)["limits"] == {"maxTokens": 900}
    state = await read(handle)
    assert state.budget is not None and state.budget.limits.max_tokens == 900
    assert state.budget.limits.max_model_calls is None
