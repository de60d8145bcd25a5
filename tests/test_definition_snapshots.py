"""A running thread of a pinned agent keeps the definitions it started with; new threads get
edited ones (a `latest` agent's threads move at their next turn: test_definitions_versions.py)."""

from __future__ import annotations

from pathlib import Path

from support import add_script, idle_after, start_thread, wait_until

from weft.definitions import load_directory
from weft.workers.scripted_model import ScriptedModelServer


def _write(root: Path, script: str, prompt: str) -> None:
    for folder in ("models", "prompts", "agents"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "models" / "m.yaml").write_text(f"provider: scripted\nmodel: {script}\n")
    (root / "prompts" / "p.yaml").write_text(f"toolDescription: d\nmodel: m\nprompt: {prompt}\n")
    (root / "agents" / "helper.yaml").write_text("definitionsPolicy: pinned\nsideA:\n  prompt: p\n")


def _system_prompts(server: ScriptedModelServer, script: str) -> list[str]:
    return [r["messages"][0]["content"] for r in server.requests if r["model"] == script]


async def test_edited_definitions_do_not_change_a_running_thread(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """After a prompt file is edited and the worker restarted, the old thread (its agent
    pinned) keeps its snapshot and a new thread uses the edit."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    root = tmp_path / "defs"
    _write(root, script, "Version one.")
    first = await start_worker(load_directory(root))
    old = await start_thread(
        temporal_client, first.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    await wait_until(old, idle_after(1))
    await first.__aexit__(None, None, None)

    _write(root, script, "Version two.")
    second = await start_worker(load_directory(root), task_queue=first.task_queue)
    await old.signal("queue_message", {"role": "user", "content": "again"})
    await wait_until(old, idle_after(2))
    new = await start_thread(
        temporal_client, second.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    await wait_until(new, idle_after(1))
    prompts = _system_prompts(scripted_server, script)
    assert prompts == ["Version one.", "Version one.", "Version two."]
