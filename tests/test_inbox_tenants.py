"""The inbox page keeps tenants apart, in a real Chromium over the whole stack (dev server,
worker, scripted model, `weft serve`'s app): opened with tenant A's key while both tenants
have threads waiting on a human, it lists A's waiting thread and nothing of B's."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
from api_support import ApiStack, api_stack
from browser_support import launch_chromium, page_problems, screenshot
from playwright.async_api import async_playwright, expect
from support import add_script, agent_definitions

SCOPES = ["threads:read", "threads:write", "actions:respond", "tasks:read", "tasks:write"]
SCRIPT = {
    "turns": [
        {
            "match": "ask",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which?"}}]},
                {"text": "ok"},
            ],
        }
    ]
}


async def _waiting_thread(stack: ApiStack, key: str, message: str) -> str:
    """A thread of `key`'s tenant, started with `message`, once it waits on a human."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=60, base_url=stack.url, headers=headers) as http:
        started = await http.post("/threads", json={"agent": "helper", "messages": [message]})
        assert started.status_code == 201, started.text
        thread_id: str = started.json()["threadId"]
        for _ in range(300):
            read: dict[str, Any] = (await http.get(f"/threads/{thread_id}")).json()
            if read.get("pendingActions"):
                return thread_id
            await asyncio.sleep(0.1)
    raise AssertionError(f"{thread_id} never waited on a human")


async def test_the_inbox_with_tenant_as_key_shows_none_of_tenant_bs_waiting_threads(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Both tenants have a thread waiting on a human (B's two, one started first and one
    last); the page opened with A's key lists A's, and once it has, its DOM holds none of
    B's thread ids nor B's marker; B's thread opened by id is refused as an unknown one."""
    marker = f"zebracorn-{uuid.uuid4().hex[:10]}"
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, SCRIPT), tools=["ask_human"])
    )
    async with (
        api_stack(temporal_client, weft_config, worker.task_queue) as stack,
        async_playwright() as playwright,
    ):
        a_key = stack.store.api_keys.create("tenant-a", SCOPES).secret
        b_key = stack.store.api_keys.create("tenant-b", SCOPES).secret
        theirs = [await _waiting_thread(stack, b_key, f"ask {marker} first")]
        ours = await _waiting_thread(stack, a_key, "ask as tenant A")
        theirs.append(await _waiting_thread(stack, b_key, f"ask {marker} last"))

        # The server's token lists all three as waiting: B's are there to be leaked.
        async def all_listed() -> bool:
            page = await stack.http.get("/threads", params={"awaiting": "any", "limit": 100})
            return {ours, *theirs} <= {t["threadId"] for t in page.json()["threads"]}

        for _ in range(300):
            if await all_listed():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("visibility never listed the three waiting threads")

        browser = await launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            problems = page_problems(page)
            await page.goto(f"{stack.url}/inbox?token={a_key}")
            mine = page.locator(f'#waiting li[data-thread-id="{ours}"]')
            await expect(mine).to_contain_text("asks a question", timeout=30_000)
            await expect(page.locator("#jobs-empty")).to_be_visible()  # the jobs list read too
            await expect(page.locator("#waiting > li")).to_have_count(1)
            dom = await page.content()
            assert ours in dom
            shown = [thread_id for thread_id in theirs if thread_id in dom]
            assert not shown, f"tenant B's threads {shown} are on tenant A's page"
            assert marker not in dom

            # B's thread opened by its id is refused as an id nobody started, and shows
            # nothing of it (the browser logs each refused request as an error itself).
            for thread_id in (theirs[0], f"helper-{uuid.uuid4().hex[:12]}"):
                await page.fill("#open-id", thread_id)
                await page.click("#open-form button")
                error = page.locator("#thread-error")
                await expect(error).to_have_text(f"no thread '{thread_id}'")
            await expect(page.locator("#transcript > *")).to_have_count(0)
            assert marker not in await page.content()
            problems[:] = [p for p in problems if "404 (Not Found)" not in p]
            print(
                f"inbox tenants screenshot: {await screenshot(page, tmp_path, 'inbox-tenants.png')}"
            )
            assert not problems, problems
        finally:
            await browser.close()
        for thread_id in (ours, *theirs):
            await stack.http.post(f"/threads/{thread_id}/terminate", json={})
