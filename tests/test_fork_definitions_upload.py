"""`POST /threads/{id}/fork` with a definitions set in its body: YAML documents by path,
checked as a definitions folder is, on a real stack (docs/time-travel.md)."""

from __future__ import annotations

from api_support import api_stack
from fork_support import jot_definitions, source_script, turn_ends, two_turns
from support import add_script, idle_after, wait_until

from weft.client.threads import Threads


def _documents(script: str) -> dict[str, str]:
    """The agent `helper` on another model; its prompt keeps the source's `jot` tool."""
    return {
        "models/other_model.yaml": f"provider: scripted\nmodel: {script}\n",
        "prompts/other_prompt.yaml": (
            "toolDescription: answers\nmodel: other_model\nprompt: You answer.\ntools: [jot]\n"
        ),
        "agents/helper.yaml": '{"sideA": {"prompt": "other_prompt"}}\n',  # JSON is YAML
    }


async def test_fork_on_uploaded_definitions(
    start_worker, temporal_client, weft_config, scripted_server
):
    """A fork given documents answers on their model and still offers the source's tool;
    Python files, a bad field and an unknown tool are each 422 naming the file and field,
    and start nothing."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    other = add_script(scripted_server, {"replies": [{"text": "the uploaded model"}]})
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        threads = Threads(temporal_client, task_queue=worker.task_queue, store=stack.store)
        source = await two_turns(threads, stack.store)
        at = turn_ends(stack.store, source)[1].turn_id
        url = f"/threads/{source}/fork"
        known = {row.thread_id for row in stack.store.threads.list()}

        python = await stack.http.post(
            url, json={"at": at, "definitions": {"tools/evil.py": "import os"}}
        )
        assert python.status_code == 422, python.text
        assert "tools/evil.py" in python.text and "not accepted over HTTP" in python.text
        bad_field = {**_documents(other), "models/other_model.yaml": "provider: scripted\n"}
        missing = await stack.http.post(url, json={"at": at, "definitions": bad_field})
        assert missing.status_code == 422, missing.text
        assert "models/other_model.yaml" in missing.text and "model" in missing.text
        unknown_tool = {
            **_documents(other),
            "prompts/other_prompt.yaml": (
                "toolDescription: answers\nmodel: other_model\nprompt: x\ntools: [nope]\n"
            ),
        }
        refused = await stack.http.post(url, json={"at": at, "definitions": unknown_tool})
        assert refused.status_code == 422, refused.text
        assert "prompts/other_prompt.yaml: tools[0]: unknown tool 'nope'" in refused.text
        assert {row.thread_id for row in stack.store.threads.list()} == known

        made = await stack.http.post(url, json={"at": at, "definitions": _documents(other)})
        assert made.status_code == 201, made.text
        fork = made.json()["threadId"]
        await threads.send(fork, "who speaks")
        await wait_until(temporal_client.get_workflow_handle(fork), idle_after(3))
        assert stack.store.messages.list(fork)[-1].content == "the uploaded model"
        assert stack.store.values.get(fork, "stage") == "two"
        read = (await stack.http.get(f"/threads/{fork}")).json()
        assert read["forkedFrom"]["threadId"] == source
