"""The README's two-agent example runs as written, on the demo's definitions and scripts."""

from __future__ import annotations

from pathlib import Path

import yaml
from support import idle_after, start_thread, wait_until

from weft.definitions import load_directory
from weft.workflows.search_attributes import PARENT_THREAD

DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo"


async def test_lead_delegates_to_the_researcher(start_worker, temporal_client, scripted_server):
    for name, script in yaml.safe_load((DEMO / "scripts" / "team.yaml").read_text()).items():
        scripted_server.set_script(name, script)
    worker = await start_worker(load_directory(DEMO / "definitions"))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="lead",
        messages=[{"role": "user", "content": "Is Lisbon warm in May?"}],
    )
    state = await wait_until(handle, idle_after(1))
    [child] = state.children
    assert child["name"] == "researcher" and child["status"] == "completed"
    assert child["lastResult"] == "Lisbon in May: clear and warm."
    last = worker.store.messages.list(handle.id)[-1]
    assert last.content == "Yes: the researcher reports Lisbon is clear and warm in May."
    described = await temporal_client.get_workflow_handle(child["reference"]).describe()
    assert described.parent_id == handle.id
    assert described.typed_search_attributes.get(PARENT_THREAD) == handle.id
