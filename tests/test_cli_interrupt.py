"""`weft thread interrupt` as a real subprocess against a running worker: it stops the
running turn in one line, says when there was nothing to stop, and refuses a bad `--turn`
(exit 2) or a closed thread (exit 1) in one line, with no traceback."""

from __future__ import annotations

import asyncio

import yaml
from support import (
    add_script,
    agent_definitions,
    idle_after,
    read,
    start_thread,
    wait_until,
    weft_cli,
)

# "ask me" waits on a question, so the turn cannot end by itself.
ASKING = {
    "turns": [
        {
            "match": "ask me",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]}
            ],
        },
        {"match": "*", "replies": [{"text": "hi"}]},
    ]
}


def _one_line_error(result: tuple[int, str, str], *expected: str) -> None:
    code, _, err = result
    assert code == 1 and "Traceback" not in err, err
    [line] = err.strip().splitlines()
    assert line.startswith("weft: ") and all(part in line for part in expected), line


async def test_weft_thread_interrupt(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Accepted, then a no-op, each said in one line; an empty `--turn` (exit 2) and a
    closed thread (exit 1) are one `weft:` line."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASKING), tools=["ask_human"])
    )
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "ask me"}]
    )
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    turn = state.active_turn_id

    code, _, err = await weft_cli(config, "thread", "interrupt", handle.id, "--turn", "")
    assert code == 2 and err.strip().splitlines() == [
        "weft: thread interrupt: --turn: String should have at least 1 character"
    ]
    code, out, err = await weft_cli(
        config, "thread", "interrupt", handle.id, "--turn", str(turn), "--reason", "enough"
    )
    assert (code, err) == (0, ""), err
    assert out == f"turn {turn} of {handle.id} interrupted (enough): the thread waits for input\n"
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "interrupted" and state.pending_actions == []

    code, out, _ = await weft_cli(config, "thread", "interrupt", handle.id)
    assert (code, out) == (0, f"nothing interrupted on {handle.id}: no turn is running\n")

    await handle.signal("terminate", {})
    await asyncio.wait_for(handle.result(), timeout=60)
    assert (await read(handle)).status == "cancelled"
    _one_line_error(
        await weft_cli(config, "thread", "interrupt", handle.id),
        f"thread '{handle.id}' is closed (terminated)",
    )
