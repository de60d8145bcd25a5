"""A thread on the Anthropic Messages adapter, against the scripted server's Anthropic side."""

from __future__ import annotations

import json

from support import add_script, agent_definitions, idle_after, start_thread, wait_until

from weft.definitions import define_model
from weft.workers.config import ProviderConfig


async def test_thread_with_anthropic_provider(
    start_worker, temporal_client, scripted_server, weft_config
):
    """Tool use and text stream through the Anthropic wire protocol end to end."""
    weft_config.providers["anthropic"] = ProviderConfig(
        kind="anthropic", base_url=scripted_server.anthropic_base_url, api_key="test-key"
    )
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Lisbon"}}]},
                {"text": "Lisbon is sunny."},
            ]
        },
    )
    definitions = agent_definitions(script)
    definitions.models["scripted"] = define_model(
        name="scripted", provider="anthropic", model=script
    )
    worker = await start_worker(definitions)
    scripted_server.clear_requests()
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Lisbon?"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "Lisbon is sunny."
    messages = worker.store.messages.list(handle.id)
    assert json.loads(messages[2].content)["result"]["city"] == "Lisbon"
    second = [r for r in scripted_server.requests if r["model"] == script][-1]
    assert second["path"].endswith("/v1/messages")
    assert any(
        m["role"] == "user"
        and isinstance(m["content"], list)
        and m["content"][0].get("type") == "tool_result"
        for m in second["messages"]
    )
