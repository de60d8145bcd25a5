"""The Temporal UI as a thread's window: activity summaries, the static summary and current
details, read through the client API and seen in the dev server's own UI in a real Chromium."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import launch_chromium
from playwright.async_api import async_playwright, expect
from subagent_support import family, start_boss
from support import (
    add_script,
    agent_definitions,
    idle_after,
    scratch_config,
    start_thread,
    wait_until,
)
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHandle

from weft.client.threads import Threads
from weft.contract.ui_text import SUMMARY_MAX_CHARS
from weft.transport.connection import connect
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import DevServerConfig, load_config
from weft.workers.dev_server import DevServer, free_port
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.search_attributes import ensure_search_attributes

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-ui-test-5f0c9a1e7d"
FIRST_LINE = "Weather in Paris?"
WEATHER_SUMMARY = 'weather(city="Paris")'
NOTE_SUMMARY = 'note(text="remember [secret]")'
TOOLS_THEN_ANSWER = {
    "replies": [
        {
            "tool_calls": [
                {"name": "weather", "arguments": {"city": "Paris"}},
                {"name": "note", "arguments": {"text": f"remember {SECRET}"}},
            ]
        },
        {"text": "It is sunny in Paris."},
    ]
}
SCHEDULED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_MARKER_RECORDED,  # local activities
    EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
}


@pytest.fixture
async def ui_server() -> AsyncIterator[DevServer]:
    """A dev server of its own with the UI on a free port (the shared one runs without)."""
    tuned = load_config(ROOT / "temporal-dev.yml", environ={}).temporal.dev_server
    config = DevServerConfig(
        ui_port=free_port(),
        db_file=None,
        search_attributes=tuned.search_attributes,
        dynamic_config=tuned.dynamic_config,
    )
    server = DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=False, ui=True)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def ui_worker(
    ui_server: DevServer, scripted_server: ScriptedModelServer, tmp_path: Path
) -> AsyncIterator[tuple[Client, AgentWorker]]:
    """A client of the UI server with weft's search attributes, and a worker on it playing
    TOOLS_THEN_ANSWER."""
    client = await connect(ui_server.address)
    await ensure_search_attributes(client, "default")
    config = scratch_config(tmp_path)
    config.temporal.address = ui_server.address
    script = add_script(scripted_server, TOOLS_THEN_ANSWER)
    async with AgentWorker(
        client,
        config,
        definitions=agent_definitions(script),
        scripted=scripted_server,
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
    ) as worker:
        yield client, worker


async def test_the_ui_shows_tool_summaries_and_the_static_summary(ui_server, ui_worker):
    """A thread's page in the dev server's UI lists each tool call by its summary (the tool
    and its arguments, the secret redacted) and shows the thread's static summary."""
    client, worker = ui_worker
    threads = Threads(client, task_queue=worker.task_queue)
    handle = await threads.start(
        "helper", messages=[f"{FIRST_LINE} token {SECRET}\nmore"], env={"TOKEN": SECRET}
    )
    await wait_until(handle, idle_after(1))
    run_id = (await handle.describe()).run_id
    summaries = await _summaries(client, handle)
    expected_summary = f"helper · {FIRST_LINE} token [secret]"
    assert summaries[0] == expected_summary

    async with async_playwright() as playwright:
        browser = await launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 1000})
            url = f"{ui_server.ui_url}/namespaces/default/workflows/{handle.id}/{run_id}"
            await page.goto(f"{url}/history")
            rows = page.get_by_test_id("event-summary-row")
            for text in (WEATHER_SUMMARY, NOTE_SUMMARY, "model scripted · step 2 · side a"):
                await expect(rows.filter(has_text=text)).to_have_count(1, timeout=30_000)
            await expect(rows.filter(has_text=expected_summary)).to_have_count(1)
            await expect(rows.filter(has_text=SECRET)).to_have_count(0)

            # The timeline labels each activity with its type and summary.
            await page.goto(f"{url}/timeline")
            events = page.get_by_role("button", name=re.compile(r"^Event "))
            tool_calls = page.get_by_role("button", name=re.compile(r"^Event tool\.call"))
            await expect(tool_calls).to_contain_text(
                [f"tool.call • {WEATHER_SUMMARY}", f"tool.call • {NOTE_SUMMARY}"], timeout=30_000
            )
            await expect(events.filter(has_text=SECRET)).to_have_count(0)

            await page.get_by_test_id("user-metadata-tab").click()
            # The UI renders both as markdown, each in a sandboxed frame: summary, then details.
            frames = page.frame_locator("main iframe")
            summary, details = frames.nth(0).locator("body"), frames.nth(1).locator("body")
            await expect(summary).to_have_text(expected_summary, timeout=30_000)
            # Current details come from the live worker through the metadata query.
            await expect(details).to_contain_text("waiting_input", timeout=30_000)
            await expect(details).to_contain_text("queue: 0")
            await expect(details).not_to_contain_text(SECRET)
        finally:
            await browser.close()
    await handle.signal("terminate", {})


async def test_summaries_through_the_client_api(ui_worker):
    """describe() gives the static summary; every command in history carries a short,
    secret-free summary; the current details say the thread's state."""
    client, worker = ui_worker
    threads = Threads(client, task_queue=worker.task_queue)
    handle = await threads.start("helper", messages=[FIRST_LINE], env={"TOKEN": SECRET})
    await wait_until(handle, idle_after(1))

    description = await handle.describe()
    assert await description.static_summary() == f"helper · {FIRST_LINE}"
    summaries = await _summaries(client, handle)
    assert {WEATHER_SUMMARY, NOTE_SUMMARY, "load definitions of helper"} <= set(summaries)
    assert "model scripted · step 1 · side a" in summaries
    assert all(SECRET not in s and len(s) <= SUMMARY_MAX_CHARS for s in summaries)

    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    details = metadata.current_details
    assert details.startswith("**helper** · `waiting_input`")
    assert "- queue: 0" in details and "tokens" in details
    assert SECRET not in details
    await handle.signal("terminate", {})


async def test_a_thread_started_as_plain_json_has_no_static_summary(ui_worker):
    """A service that starts a thread without weft's client sets no static summary; the
    workflow still summarises its activities."""
    client, worker = ui_worker
    handle = await start_thread(
        client, worker.task_queue, messages=[{"role": "user", "content": FIRST_LINE}]
    )
    await wait_until(handle, idle_after(1))
    assert await (await handle.describe()).static_summary() is None
    assert WEATHER_SUMMARY in await _summaries(client, handle)
    await handle.signal("terminate", {})


async def _summaries(client: Client, handle: WorkflowHandle[Any, Any]) -> list[str]:
    """The user-metadata summary of every history event that has one, in order."""
    converter = client.data_converter.payload_converter
    found = []
    async for event in handle.fetch_history_events():
        if event.HasField("user_metadata") and event.user_metadata.HasField("summary"):
            assert event.event_type in SCHEDULED, event
            found.append(converter.from_payload(event.user_metadata.summary, str))
    return found


async def test_a_subagent_gets_a_static_summary_without_its_parents_secrets(
    start_worker, temporal_client, scripted_server
):
    """A child thread is summarised by its agent, its name and its task's first line, with
    the parent's secret env values redacted."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {"message": f"Rome with {SECRET}", "label": "Rome desk"},
                        }
                    ]
                },
                {"text": "Done."},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "21 C"}}]}]},
    )
    worker = await start_worker(family(parent, child, subagent={"initAgentNameProperty": "label"}))
    handle = await start_boss(temporal_client, worker, env={"TOKEN": SECRET})
    state = await wait_until(handle, idle_after(1))
    [entry] = state.children
    description = await temporal_client.get_workflow_handle(entry["reference"]).describe()
    summary = await description.static_summary()
    assert summary == "researcher · subagent Rome desk · Rome with [secret]"
