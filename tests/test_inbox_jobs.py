"""The inbox page's Jobs section, in a real Chromium over the whole stack: a tenant's key
sees its own job's bar fill live to 100% and its failed item when the list is opened,
and never another tenant's job; a key without `tasks:read` gets no Jobs section."""

from __future__ import annotations

import asyncio

from api_support import api_stack
from browser_support import launch_chromium, page_problems, screenshot
from playwright.async_api import async_playwright, expect
from support import add_script, agent_definitions

from weft.client.jobs import Jobs

# An answer that is not JSON misses the acceptance schema: that item fails.
SCRIPT = {
    "turns": [
        {"match": "good", "replies": [{"text": '{"n": 1}', "delay_ms": 300}]},
        {"match": "*", "replies": [{"text": "not json", "delay_ms": 300}]},
    ]
}
SCHEMA = {"type": "object", "required": ["n"]}


async def test_inbox_shows_a_tenants_jobs_filling_live(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with (
        api_stack(temporal_client, weft_config, worker.task_queue) as stack,
        async_playwright() as playwright,
    ):
        jobs = Jobs(temporal_client, stack.store, task_queue=worker.task_queue)
        # Another tenant's job, ended before the page is opened: it is never listed.
        other = await jobs.create("helper", ["good 0"], acceptance_schema=SCHEMA, tenant="other")
        await asyncio.wait_for(jobs.wait(other.job_id), timeout=60)
        key = stack.store.api_keys.create("acme", ["threads:read", "tasks:read"]).secret

        browser = await launch_chromium(playwright)
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            problems = page_problems(page)
            await page.goto(f"{stack.url}/inbox?token={key}")
            await expect(page.locator("#jobs-empty")).to_be_visible()

            job = await jobs.create(
                "helper",
                [{"input": "good 1", "key": "a"}, {"input": "bad", "key": "b"}, "good 2"],
                acceptance_schema=SCHEMA,
                concurrency=1,
                tenant="acme",
            )
            row = page.locator(f'#jobs > li[data-job-id="{job.job_id}"]')
            bar = row.locator('[role="progressbar"]')
            # The page, opened before the job existed, shows it and follows it to its end.
            await expect(row).to_be_visible(timeout=10_000)
            await expect(bar).to_have_attribute("aria-valuenow", "100", timeout=30_000)
            await expect(row.locator(".job-percent")).to_have_text("100%")
            await expect(row.locator(".job-status")).to_have_text("failed")
            await expect(row.locator(".job-counts")).to_contain_text("3/3 done · 2 completed")
            await expect(row.locator(".job-reason")).to_have_text("1 failed of 3 items")
            widths = await row.locator(".segment").evaluate_all(
                "nodes => nodes.map((n) => n.style.width)"
            )
            assert widths[:2] == ["66.6667%", "33.3333%"] and widths[2:] == ["0%", "0%"]

            failed = row.locator("details.job-failed")
            await expect(failed.locator("summary")).to_have_text("1 failed item")
            await failed.locator("summary").click()
            failure = failed.locator(f'li[data-item-id="{job.job_id}.i1"]')
            await expect(failure).to_contain_text("b failed after 1 attempt")
            await expect(failure.locator(".job-error")).to_contain_text("not JSON")

            # The other tenant's job never shows: the page reads with the acme key.
            await expect(page.locator("#jobs > li")).to_have_count(1)
            await expect(page.locator(f'[data-job-id="{other.job_id}"]')).to_have_count(0)
            await expect(page.locator("#jobs-error")).to_be_hidden()
            print(f"inbox jobs screenshot: {await screenshot(page, tmp_path, 'inbox-jobs.png')}")
            assert not problems, problems

            # A key that may not read tasks gets no Jobs section (and no error in its place).
            threads_only = stack.store.api_keys.create("acme", ["threads:read"]).secret
            blind = await browser.new_page()
            await blind.goto(f"{stack.url}/inbox?token={threads_only}")
            await expect(blind.locator("#jobs-section")).to_be_hidden()
            await expect(blind.locator("#waiting-empty")).to_be_visible()
            await expect(blind.locator("#jobs > li")).to_have_count(0)
        finally:
            await browser.close()
