"""A tool's runCode writes `sandbox.applied` (the limits in force) and `sandbox.violation`
(eval, an unresolvable import, memory over the limit or the ceiling) as thread events that
validate against the vendored Agent Runtime schema."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field
from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    wait_until,
)

from weft.definitions import define_tool

MIB = 1024 * 1024
RUNS: list[tuple[str, dict[str, Any]]] = [
    ("export default 6 * 7", {"memoryLimitBytes": 16 * MIB, "cpuTimeLimitMs": 5000}),
    ("export default eval('1 + 1')", {}),
    ("import x from 'https://example.com/x.js'; export default x", {}),
    (
        "const a = []; while (true) a.push('x'.repeat(1024) + a.length);",
        {"memoryLimitBytes": 8 * MIB},
    ),
    ("export default 1", {"memoryLimitBytes": 1 << 40}),
]


class RunArgs(BaseModel):
    """Source and runCode options."""

    source: str
    options: dict[str, Any] = Field(default_factory=dict)


async def run_with(state: Any, args: RunArgs) -> Any:
    """Runs code with the given options and returns its status."""
    result = await state.run_code(args.source, {"language": "javascript", **args.options})
    return {"status": result.status}


async def test_run_code_writes_sandbox_applied_and_violations(
    start_worker, temporal_client, scripted_server
):
    """Each run writes sandbox.applied with its limits; eval, a URL import, a memory overrun
    and a limit over the ceiling each write one sandbox.violation of their kind."""
    calls = [
        {"name": "run_with", "arguments": {"source": source, "options": options}}
        for source, options in RUNS
    ]
    script = add_script(scripted_server, {"replies": [{"tool_calls": calls}, {"text": "ran"}]})
    definitions = agent_definitions(script, tools=["run_with"]).add(
        define_tool(name="run_with", description="Run code", args=RunArgs, execute=run_with)
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "run"}]
    )
    await wait_until(handle, idle_after(1), timeout=60)
    statuses = [
        json.loads(m.content or "{}")["result"]["status"]
        for m in worker.store.messages.list(handle.id)
        if m.role == "tool"
    ]
    assert statuses == ["success", "error", "link_error", "memory", "link_error"]
    events = worker.store.events.read(handle.id, limit=10_000)
    applied = [e for e in events if e.type == "sandbox.applied"]
    assert len(applied) == 4  # the run over the ceiling never started
    first = applied[0].payload
    assert first["memoryLimitBytes"] == 16 * MIB and first["cpuTimeLimitMs"] == 5000
    assert first["language"] == "javascript" and "eval" in first["denied"]
    assert applied[3].payload["memoryLimitBytes"] == 8 * MIB
    assert all(e.tool_call_id for e in applied)
    violations = [e.payload for e in events if e.type == "sandbox.violation"]
    assert [v["kind"] for v in violations] == ["eval", "import", "memory", "memory"]
    assert violations[0]["error"] == "EvalError"
    assert violations[2]["memoryLimitBytes"] == 8 * MIB and violations[2]["status"] == "memory"
    assert "ceiling" in violations[3]["message"]
    validator = event_schema_validator()
    for event in events:
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"
