"""The inbox page's "Stop this turn" button (`interrupt_turn`), in a real Chromium driven by
Playwright over the whole stack: a thread streaming a slow reply is stopped from the page,
stays open, and answers the next message sent from the page."""

from __future__ import annotations

from api_support import API_TOKEN, api_stack
from browser_support import launch_chromium, page_problems
from playwright.async_api import async_playwright, expect
from support import add_script, agent_definitions

SLOW_THEN_QUICK = {
    "turns": [
        {
            "match": "tell me everything",
            "replies": [{"text": "Once upon a time " * 40, "chunk_size": 4, "chunk_delay_ms": 150}],
        },
        {"match": "*", "replies": [{"text": "Short and sweet."}]},
    ]
}


async def test_inbox_stops_a_running_turn(
    start_worker, temporal_client, scripted_server, weft_config
):
    """The button shows while a turn runs; a click stops the turn (the thread goes idle, the
    button and the interrupted call's streamed text go away), and the thread answers the
    next message."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    async with (
        api_stack(temporal_client, weft_config, worker.task_queue) as stack,
        async_playwright() as playwright,
    ):
        browser = await launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            problems = page_problems(page)
            await page.goto(f"{stack.url}/inbox?token={API_TOKEN}")
            handle = await stack.ctx.threads.start("helper", messages=["tell me everything"])
            await page.fill("#open-id", handle.id)
            await page.click("#open-form button")
            streaming = page.locator("#live .message.streaming .text")
            await expect(streaming).to_contain_text("Once upon", timeout=15_000)
            stop = page.locator("#interrupt-turn")
            await expect(stop).to_be_visible(timeout=15_000)

            await stop.click()
            activity = page.locator("#activity")
            await expect(activity).to_have_text(
                "turn interrupted: stopped from the inbox", timeout=15_000
            )
            await expect(stop).to_be_hidden(timeout=15_000)
            await expect(page.locator("#thread-status")).to_have_text("waiting_input")
            read = await stack.ctx.threads.read(handle.id)
            assert read.stop_reason == "interrupted" and read.active_turn_id is None

            await page.fill("#message-text", "Just the gist?")
            await page.click("#message-form button")
            transcript = page.locator("#transcript")
            await expect(transcript.locator(".message.assistant").last).to_contain_text(
                "Short and sweet.", timeout=15_000
            )
            await expect(stop).to_be_hidden(timeout=15_000)
            # The interrupted call stored no message: its streamed text is gone, not kept.
            await expect(transcript).not_to_contain_text("Once upon")
            await expect(page.locator("#live .message")).to_have_count(0)
            assert problems == []
        finally:
            await browser.close()
        await stack.ctx.threads.terminate(handle.id)
