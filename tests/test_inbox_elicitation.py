"""The inbox page answers an MCP server's elicitation, in a real Chromium driven by
Playwright over the whole stack: the server's message and a form built from its requested
schema (text, number, checkbox, select; required fields marked), sent as a typed object,
and a second elicitation declined.

The elicitation is made by sending the `mcp_elicitation` signal the `tool.call` activity
sends, to a thread whose turn waits on an ask_human question (so a turn is running)."""

from __future__ import annotations

from api_support import API_TOKEN, api_stack, read_until, send_elicitation
from browser_support import launch_chromium, page_problems, screenshot
from playwright.async_api import async_playwright, expect
from support import add_script, agent_definitions

from weft.contract.mcp import QUERY_MCP_ELICITATION

ASK = {
    "replies": [
        {"tool_calls": [{"name": "ask_human", "arguments": {"question": "When?"}}]},
        {"text": "Booked."},
    ]
}
# Markup in the server's message must show as text.
MESSAGE = "Where should I book? <b>now</b>"
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "title": "City", "description": "where to stay"},
        "nights": {"type": "integer", "minimum": 1},
        "budget": {"type": "number"},
        "insured": {"type": "boolean"},
        "class": {"type": "string", "enum": ["economy", "business"]},
        "note": {"type": "string"},
    },
    "required": ["city", "nights", "class"],
}


async def test_inbox_answers_and_declines_an_elicitation(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """The page shows the server's message and a form of the requested fields (required
    ones marked, a required field left empty is not sent); Send resolves the action with
    the typed object (numbers as numbers, a boolean, the enum's value) and Decline with a
    deny, and the waiting activity reads accept and decline."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASK), tools=["ask_human"])
    )
    async with (
        api_stack(temporal_client, weft_config, worker.task_queue) as stack,
        async_playwright() as playwright,
    ):
        handle = await stack.ctx.threads.start("helper", messages=["book a trip"])
        read = await read_until(stack, handle.id, lambda r: bool(r["pendingActions"]))
        turn_id = read["pendingActions"][0]["turnId"]
        answered = await send_elicitation(stack, handle.id, turn_id, message=MESSAGE, schema=SCHEMA)
        browser = await launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            problems = page_problems(page)
            await page.goto(f"{stack.url}/inbox?token={API_TOKEN}")
            await page.fill("#open-id", handle.id)
            await page.click("#open-form button")

            form = page.locator(f'#action form[data-action-id="{answered}"]')
            await expect(form).to_have_class("pending elicitation", timeout=15_000)
            await expect(form.locator("h3")).to_have_text("MCP server travel asks")
            await expect(form.locator(".prompt")).to_have_text(MESSAGE)
            await expect(form.locator("b")).to_have_count(0)
            await expect(form).to_contain_text("during book_trip")
            names = form.locator(".field .field-name")
            await expect(names).to_have_text(
                ["City *", "nights *", "budget", "insured", "class *", "note"]
            )
            await expect(form.locator('[data-field="city"]')).to_contain_text("where to stay")
            field = form.locator
            await expect(field('[data-field="nights"] input')).to_have_attribute("type", "number")
            await expect(field('[data-field="nights"] input')).to_have_attribute("step", "1")
            await expect(field('[data-field="budget"] input')).to_have_attribute("step", "any")
            await expect(field('[data-field="insured"] input')).to_have_attribute(
                "type", "checkbox"
            )
            await expect(field('[data-field="class"] option')).to_have_text(
                ["—", "economy", "business"]
            )
            # The waiting list names what the thread waits for, once visibility catches up.
            listed = page.locator(f'#waiting li[data-thread-id="{handle.id}"]')
            await expect(listed).to_contain_text("a tool asks for input", timeout=30_000)

            shot = await screenshot(page, tmp_path, "inbox-elicitation.png")
            print(f"inbox elicitation screenshot: {shot}")

            # A required field left empty: the browser refuses, nothing is sent.
            await field('[data-field="city"] input').fill("Oslo")
            await form.get_by_role("button", name="Send").click()
            missing = await field('[data-field="nights"] input').evaluate(
                "input => input.validity.valueMissing"
            )
            assert missing is True
            state = await stack.ctx.threads.read(handle.id)
            assert answered in {a["actionId"] for a in state.pending_actions}

            await field('[data-field="nights"] input').fill("3")
            await field('[data-field="budget"] input').fill("120.5")
            await field('[data-field="insured"] input').check()
            await field('[data-field="class"] select').select_option("business")
            await form.get_by_role("button", name="Send").click()
            await expect(form).to_have_count(0, timeout=15_000)  # resolved: the form goes
            typed = {"city": "Oslo", "nights": 3, "budget": 120.5, "insured": True}
            typed["class"] = "business"  # `note`, left empty and optional, is not sent
            reply = await handle.query(QUERY_MCP_ELICITATION, answered)
            assert reply == {"actionId": answered, "action": "accept", "content": typed}

            declined = await send_elicitation(
                stack, handle.id, turn_id, message="Shall I insure it?", schema=SCHEMA
            )
            second = page.locator(f'#action form[data-action-id="{declined}"]')
            await expect(second).to_contain_text("Shall I insure it?", timeout=15_000)
            await second.get_by_role("button", name="Decline").click()
            await expect(second).to_have_count(0, timeout=15_000)
            reply = await handle.query(QUERY_MCP_ELICITATION, declined)
            assert reply["action"] == "decline"
            # The ask_human question still waits, untouched.
            await expect(page.locator("#action .pending.ask_human")).to_contain_text("When?")
            assert not problems, problems
        finally:
            await browser.close()
        await stack.ctx.threads.terminate(handle.id)
        await stack.ctx.threads.result(handle.id)
        resolved = {
            e.action_id: e.payload
            for e in stack.store.events.read(handle.id, types=["action.resolved"])
            if e.payload["actionType"] == "elicitation"
        }
        assert resolved[answered]["decision"] == "answer"
        assert resolved[answered]["answer"] == typed
        assert resolved[answered]["decidedBy"] == "human"
        assert resolved[declined]["decision"] == "deny"
