"""Definition fields on a live thread: images, recentImageThreshold, variables, display fields."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import add_script, idle_after, read, wait_until
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from weft.contract.thread import WORKFLOW_TYPE
from weft.definitions import load_directory

PNG = b"\x89PNG\r\n\x1a\nnot really a picture"
URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def _definitions(
    root: Path, script: str, *, model: str = "", prompt: str = "", agent: str = ""
) -> Any:
    files = {
        "models/m.yaml": f"provider: scripted\nmodel: {script}\n{model}",
        "prompts/p.yaml": f"toolDescription: d\nmodel: m\nprompt: You help.\n{prompt}",
        "agents/helper.yaml": f"sideA:\n  prompt: p\n{agent}",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return load_directory(root)


async def _start(
    client: Client,
    task_queue: str,
    messages: list[dict[str, Any]],
    *,
    thread_id: str | None = None,
    **fields: Any,
) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        WORKFLOW_TYPE,
        {"agent": "helper", "messages": messages, **fields},
        id=thread_id or f"thread-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
    )


def _user_contents(server: Any, script: str) -> list[list[Any]]:
    """Per request to `script`, the content of each user message it carried."""
    return [
        [m["content"] for m in r["messages"] if m["role"] == "user"]
        for r in server.requests
        if r["model"] == script
    ]


async def test_recent_images_reach_the_model_and_older_ones_become_placeholders(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """A vision model gets recent image attachments as image parts; past the prompt's
    recentImageThreshold they become a placeholder naming the path."""
    script = add_script(scripted_server, {"replies": [{"text": "seen"}, {"text": "seen again"}]})
    worker = await start_worker(_definitions(tmp_path, script, prompt="recentImageThreshold: 2\n"))
    thread_id = f"thread-{uuid.uuid4().hex[:12]}"
    worker.store.files.write_file(thread_id, "/attachments/cat.png", PNG)
    look = {"role": "user", "content": "look", "attachments": ["/attachments/cat.png"]}
    handle = await _start(temporal_client, worker.task_queue, [look], thread_id=thread_id)
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": "and now?"})
    await wait_until(handle, idle_after(2))

    first, second = _user_contents(scripted_server, script)
    image = {"type": "image_url", "image_url": {"url": URL}}
    assert first == [
        [{"type": "text", "text": "look\n\n[attachments: /attachments/cat.png]"}, image]
    ]
    # Three messages later (look, seen, and now?) the image is past the threshold of 2.
    assert second[0] == (
        "look\n\n[attachments: /attachments/cat.png]\n"
        "[image /attachments/cat.png not shown: older than the last 2 messages]"
    )
    stored = [m for m in worker.store.messages.list(thread_id) if m.role == "user"]
    assert stored[0].attachments == ["/attachments/cat.png"]


async def test_a_model_that_cannot_see_images_gets_none(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """supportsImages: false sends no image part; the stored message keeps its attachment."""
    script = add_script(scripted_server, {"replies": [{"text": "I cannot see it"}]})
    worker = await start_worker(
        _definitions(tmp_path, script, model="capabilities: {supportsImages: false}\n")
    )
    thread_id = f"thread-{uuid.uuid4().hex[:12]}"
    worker.store.files.write_file(thread_id, "/attachments/cat.png", PNG)
    look = {"role": "user", "content": "look", "attachments": ["/attachments/cat.png"]}
    handle = await _start(temporal_client, worker.task_queue, [look], thread_id=thread_id)
    await wait_until(handle, idle_after(1))

    [[content]] = _user_contents(scripted_server, script)
    assert content == (
        "look\n\n[attachments: /attachments/cat.png]\n"
        "[image /attachments/cat.png not shown: model 'm' does not take images]"
    )
    [stored] = [m for m in worker.store.messages.list(thread_id) if m.role == "user"]
    assert stored.attachments == ["/attachments/cat.png"]
    assert worker.store.files.read_file(thread_id, "/attachments/cat.png") == PNG


VARIABLES = """variables:
  - {name: CITY, type: text, required: true, description: the city to plan for}
  - {name: MOOD, type: text}
prompt:
  - {type: text, content: "City: "}
  - {type: env, property: CITY}
"""


async def test_a_missing_required_variable_stops_the_thread_naming_the_file(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """A thread started without a required variable fails at start, naming file and variable."""
    script = add_script(scripted_server, {"replies": [{"text": "never"}]})
    worker = await start_worker(_variable_definitions(tmp_path, script))
    handle = await _start(temporal_client, worker.task_queue, [{"role": "user", "content": "hi"}])
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert (
        "prompts/p.yaml: variables.CITY: required variable 'CITY' (the city to plan for) is not set"
        in str(caught.value.cause)
    )
    assert not [r for r in scripted_server.requests if r["model"] == script]


async def test_a_declared_text_variable_is_shown_to_the_model(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """A required variable given in the thread's env starts it, typed text as declared, so
    the prompt's env part shows its value."""
    script = add_script(scripted_server, {"replies": [{"text": "Paris it is"}]})
    worker = await start_worker(_variable_definitions(tmp_path, script))
    handle = await _start(
        temporal_client,
        worker.task_queue,
        [{"role": "user", "content": "plan"}],
        env={"CITY": "Paris"},
    )
    await wait_until(handle, idle_after(1))
    [request] = [r for r in scripted_server.requests if r["model"] == script]
    assert request["messages"][0] == {"role": "system", "content": "City: Paris"}


def _variable_definitions(root: Path, script: str) -> Any:
    files = {
        "models/m.yaml": f"provider: scripted\nmodel: {script}\n",
        "prompts/p.yaml": "toolDescription: d\nmodel: m\n" + VARIABLES,
        "agents/helper.yaml": "sideA:\n  prompt: p\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return load_directory(root)


async def test_thread_read_shows_the_agents_display_fields(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """title, description, icon and the side's label reach thread_read (weft thread show)."""
    script = add_script(scripted_server, {"replies": [{"text": "hello"}]})
    agent = "  label: Planner\ntitle: Trip planner\ndescription: Plans trips\nicon: /i.svg\n"
    worker = await start_worker(_definitions(tmp_path, script, agent=agent))
    handle = await _start(temporal_client, worker.task_queue, [{"role": "user", "content": "hi"}])
    await wait_until(handle, idle_after(1))
    info = (await read(handle)).model_dump(mode="json", by_alias=True)["agentInfo"]
    assert info == {
        "name": "helper",
        "title": "Trip planner",
        "description": "Plans trips",
        "icon": "/i.svg",
        "sideLabels": {"a": "Planner"},
    }
