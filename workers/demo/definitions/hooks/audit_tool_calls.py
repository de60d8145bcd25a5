"""Audits every tool call that succeeded: a line in the thread's key-value store and an
`audit` event. The travel assistant lists it in its agent's `hooks`, so it also runs
inside the packing advisor prompt tool (that prompt lists no hooks of its own)."""

from typing import Any

from weft.activities.tool_state import ThreadState
from weft.definitions import define_hook


async def audit(state: ThreadState, data: dict[str, Any]) -> None:
    call = data["toolCall"]["function"]
    log = await state.get_value("audit_log") or []
    await state.set_value(
        "audit_log", [*log, {"tool": call["name"], "arguments": call["arguments"]}]
    )
    await state.emit("audit", {"tool": call["name"], "entries": len(log) + 1})
    # None keeps the result as the tool returned it; a dict would replace it.


hook = define_hook(hook="after_tool_call_success", execute=audit)
