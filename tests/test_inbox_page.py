"""The inbox page (`/inbox`): how it takes the token and what headers it is served with, and,
in a real Chromium driven by Playwright over the whole stack (dev server, worker, scripted
model, `weft serve`'s app), a thread that streams its reply, waits for permission to run a
tool, is approved from the page and completes its turn."""

from __future__ import annotations

import re

import httpx
from api_support import API_TOKEN, api_stack
from browser_support import launch_chromium, page_problems, screenshot
from playwright.async_api import async_playwright, expect
from support import add_script, agent_definitions

FIRST_TEXT = "Let me look up the weather in Oslo for you."
# Markup in model text must show as text (the page never renders data as HTML).
FINAL_TEXT = "It is sunny in Oslo, <b>21</b> degrees."
RETRIED_TEXT = "Let me think about where to go next."
# The first reply waits a moment and streams slowly, so the page is open while it streams.
# The second turn (a message sent from the page) asks the human a question.
WEATHER_THEN_A_QUESTION = {
    "turns": [
        {
            "match": "Weather in Oslo?",
            "replies": [
                {
                    "text": FIRST_TEXT,
                    "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}],
                    "delay_ms": 1000,
                    "chunk_size": 4,
                    "chunk_delay_ms": 60,
                },
                {"text": FINAL_TEXT, "chunk_size": 6, "chunk_delay_ms": 20},
            ],
        },
        {
            "match": "where next",
            "replies": [
                {
                    # The first attempt breaks off mid-stream; its retry starts the text anew.
                    "text": RETRIED_TEXT,
                    "tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}],
                    "chunk_size": 4,
                    "chunk_delay_ms": 80,
                    "drop_after_chunks": 5,
                    "times": 1,
                },
                {"text": "Noted: Bergen it is."},
            ],
        },
    ]
}


async def test_page_takes_the_token_once_and_keeps_it_in_a_cookie(temporal_client, weft_config):
    """No token or a wrong one is 401; the right one becomes an HttpOnly, SameSite=Lax
    cookie and leaves the URL, even over the cookie of an older token; the page and its
    files come with a strict CSP."""
    async with api_stack(temporal_client, weft_config, "tq-inbox-unused") as stack:
        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as browser:
            assert (await browser.get("/inbox")).status_code == 401
            assert (await browser.get("/inbox", params={"token": "wrong"})).status_code == 401
            assert (await browser.get("/inbox/inbox.js")).status_code == 401
            # The query token opens only the page, never the API.
            assert (await browser.get("/threads", params={"token": API_TOKEN})).status_code == 401

            moved = await browser.get("/inbox", params={"token": API_TOKEN})
            assert (moved.status_code, moved.headers["location"]) == (303, "/inbox")
            cookie = [part.strip().lower() for part in moved.headers["set-cookie"].split(";")]
            assert cookie[0] == f"weft_token={API_TOKEN}"
            assert {"httponly", "samesite=lax", "path=/"} <= set(cookie)
            stale = {"Cookie": "weft_token=a-token-of-an-earlier-serve"}
            renewed = await browser.get("/inbox", params={"token": API_TOKEN}, headers=stale)
            assert renewed.status_code == 303
            assert renewed.headers["set-cookie"].startswith(f"weft_token={API_TOKEN};")
            assert (await browser.get("/inbox", headers=stale)).status_code == 401

            with_cookie = {"Cookie": f"weft_token={API_TOKEN}"}
            page = await browser.get("/inbox", headers=with_cookie)
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert page.headers["content-security-policy"].startswith("default-src 'self'")
            assert page.headers["x-content-type-options"] == "nosniff"
            assert page.headers["cache-control"] == "no-store"
            assert '<script src="/inbox/inbox.js" defer></script>' in page.text
            assert page.text.count("<script") == 1  # no inline script: the CSP would refuse it

            for name, media_type in (("inbox.js", "text/javascript"), ("inbox.css", "text/css")):
                asset = await browser.get(f"/inbox/{name}", headers=with_cookie)
                assert asset.status_code == 200
                assert asset.headers["content-type"].startswith(media_type)
                assert asset.headers["x-content-type-options"] == "nosniff"
            missing = await browser.get("/inbox/inbox_routes.py", headers=with_cookie)
            assert missing.status_code == 404 and "error" in missing.json()

        schema = (await stack.http.get("/openapi.json")).json()
        assert not [path for path in schema["paths"] if path.startswith("/inbox")]


async def test_inbox_follows_a_thread_and_answers_it(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """The page follows a thread live and answers what it waits for: streamed text as it
    streams, the thread listed as waiting, approve, the tool's result and the final reply;
    then a message from the page, an ask_human question and its answer."""
    script = add_script(scripted_server, WEATHER_THEN_A_QUESTION)
    definitions = agent_definitions(
        script, tools=["weather", "ask_human"], permissions={"mode": "default"}
    )
    worker = await start_worker(definitions)
    async with (
        api_stack(temporal_client, weft_config, worker.task_queue) as stack,
        async_playwright() as playwright,
    ):
        browser = await launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            problems = page_problems(page)
            await page.goto(f"{stack.url}/inbox?token={API_TOKEN}")
            assert page.url == f"{stack.url}/inbox"  # the token left the address bar
            (cookie,) = await page.context.cookies()
            assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
                "weft_token",
                True,
                "Lax",
            )

            # An API error is shown on the page (and the browser logs the 404 itself).
            await page.fill("#open-id", "thread-nobody-started")
            await page.click("#open-form button")
            await expect(page.locator("#thread-error")).to_contain_text("thread-nobody-started")
            problems.clear()

            handle = await stack.ctx.threads.start("helper", messages=["Weather in Oslo?"])
            await page.fill("#open-id", handle.id)
            await page.click("#open-form button")
            await expect(page.locator("#thread-error")).to_be_hidden()

            # The reply shows while it streams, then settles into the transcript.
            streaming = page.locator("#live .message.streaming .text")
            await expect(streaming).to_contain_text("Let me", timeout=15_000)
            transcript = page.locator("#transcript")
            await expect(transcript).to_contain_text(FIRST_TEXT, timeout=15_000)
            await expect(transcript.locator(".message.user")).to_have_text(["userWeather in Oslo?"])
            weather = transcript.locator('details.tool:has(.tool-name:text-is("weather"))')
            await expect(weather.locator(".tool-status")).to_have_text("waiting for permission")
            permission = page.locator("#action .pending.tool_permission")
            await expect(permission).to_contain_text("Permission to run weather")
            await expect(permission.locator(".tool-args")).to_contain_text('"city": "Oslo"')

            # The inbox lists it as waiting once Temporal's visibility has caught up.
            listed = page.locator(f'#waiting li[data-thread-id="{handle.id}"]')
            await expect(listed).to_contain_text("asks to run a tool", timeout=30_000)
            await expect(listed).to_contain_text("helper")
            await expect(listed).to_have_attribute("aria-current", "true")
            # Opened from the list, the thread is read again: its snapshot, then its events.
            await listed.get_by_role("button").click()
            await expect(transcript).to_contain_text(FIRST_TEXT)
            await expect(permission).to_be_visible()
            shot = await screenshot(page, tmp_path, "inbox-waiting.png")

            await permission.get_by_role("button", name="Approve", exact=True).click()
            await expect(weather.locator(".tool-status")).to_have_text("success", timeout=15_000)
            await weather.locator("summary").click()
            await expect(weather.locator(".tool-result")).to_contain_text("sunny")
            assistant = transcript.locator(".message.assistant")
            await expect(assistant.last).to_contain_text(FINAL_TEXT, timeout=15_000)
            await expect(page.locator("#activity")).to_contain_text("turn completed")
            await expect(page.locator("#action")).to_be_hidden()

            # A message from the page starts a turn whose model asks the human.
            await page.fill("#message-text", "And where next?")
            await page.click("#message-form button")
            # The retried attempt's text replaces what the broken one had streamed.
            live_text = page.locator("#live .message.streaming .text")
            await expect(live_text).to_have_text(re.compile("^Let me think about"), timeout=15_000)
            question = page.locator("#action .pending.ask_human")
            await expect(question).to_contain_text("Which city?", timeout=15_000)
            await expect(transcript.locator(".message.user").last).to_contain_text(
                "And where next?"
            )
            await question.locator("textarea").fill("Bergen")
            await question.get_by_role("button", name="Send answer").click()
            await expect(assistant.last).to_contain_text("Noted: Bergen it is.", timeout=15_000)
            asking = 'details.tool:has(.tool-name:text-is("ask_human"))'
            await expect(transcript.locator(asking).locator(".tool-result")).to_contain_text(
                "Bergen"
            )
            asker = assistant.filter(has=page.locator(asking))
            await expect(asker.locator(".text")).to_have_text(RETRIED_TEXT)
            await expect(page.locator("#action")).to_be_hidden()
            await expect(page.locator("#stream-status")).to_have_text("live")

            # Replays and snapshot reads never showed a message twice.
            await expect(transcript.locator(".message.user")).to_have_count(2)
            await expect(transcript.locator("details.tool")).to_have_count(2)
            await expect(assistant.filter(has_text=FIRST_TEXT)).to_have_count(1)
            await expect(assistant.filter(has_text=FINAL_TEXT)).to_have_count(1)
            await expect(transcript.locator("b")).to_have_count(0)
            await expect(page.locator("#live .message")).to_have_count(0)
            # Answered, the thread leaves the polled list once visibility catches up.
            await expect(listed).to_have_count(0, timeout=30_000)
            print(f"inbox screenshots: {shot}, {await screenshot(page, tmp_path, 'inbox.png')}")
            assert not problems, problems
        finally:
            await browser.close()
        await handle.signal("terminate", {})
