"""The hook points of one `tool.call` attempt, after the tool ran.

`after_tool_call_success` or `after_tool_call_failure` may replace the result, then
`before_store_tool_result` may replace or refuse it, then `before_create_message` sees the
result message. A refusal still stores a tool result, an error naming the hook and its
reason, so the transcript stays valid; the turn then ends with `hook_blocked`. The hooks
share the tool's ThreadState, so their intents travel back with the result.
"""

from __future__ import annotations

from typing import Any

from weft.activities.hooks.messages import after_create, before_create
from weft.activities.hooks.registry import HookRegistry, scope_of
from weft.activities.hooks.runner import EventMaker, HookRunner
from weft.activities.tool_state import ThreadState
from weft.contract.activities import ToolCallInput, ToolResult
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.hooks import HookBlock, HookName
from weft.contract.messages import Message, ToolCall

HOOK_BLOCKED_CODE = "hook_blocked"


class ToolHooks:
    """The hooks in scope for one tool call; the ThreadState's message updates run them too."""

    def __init__(
        self,
        registry: HookRegistry,
        snapshot: DefinitionSnapshot,
        call: ToolCallInput,
        state: ThreadState,
        *,
        make_event: EventMaker,
    ) -> None:
        async def same_state() -> ThreadState:
            return state

        prompt = call.scope.prompt if call.scope else None
        self.runner: HookRunner = registry.runner(
            snapshot,
            scope_of(snapshot, call.agent, call.side, prompt),
            state=same_state,
            make_event=make_event,
        )
        state.use_hooks(self.runner)

    async def result(
        self, tool_call: ToolCall, result: ToolResult
    ) -> tuple[ToolResult, HookBlock | None]:
        """The result as the tool hooks left it, or the refusal of `before_store_tool_result`."""
        point: HookName = (
            "after_tool_call_success" if result.status == "success" else "after_tool_call_failure"
        )
        if not self.runner.has(point, "before_store_tool_result"):
            return result, None
        data = {
            "toolCall": tool_call.model_dump(mode="json"),
            "result": result.model_dump(mode="json", exclude_none=True),
        }
        check = _result_of(data["toolCall"])
        outcome = await self.runner.run(point, data, check=check)
        outcome = await self.runner.run("before_store_tool_result", outcome.data, check=check)
        return ToolResult.model_validate(outcome.data["result"]), outcome.blocked

    async def message(self, message: Message) -> tuple[Message, HookBlock | None]:
        """The result message as `before_create_message` hooks left it, or their refusal."""
        kept, blocks = await before_create(self.runner, [message])
        # The message id is stored all the same (holding the refusal), so it names none.
        return (
            (kept[0], None)
            if kept
            else (message, blocks[0].model_copy(update={"message_id": None}))
        )

    async def created(self, message: Message) -> None:
        """`after_create_message` on the stored result message; pending events written."""
        await after_create(self.runner, [message])
        await self.runner.flush()


def refused(block: HookBlock) -> ToolResult:
    """The error result stored in place of a refused one: the model learns who refused."""
    return ToolResult(
        status="error",
        error=f"hook {block.hook_id!r} ({block.hook}) refused to store this tool result: "
        f"{block.reason}",
        error_code=HOOK_BLOCKED_CODE,
    )


def _result_of(tool_call: dict[str, Any]) -> Any:
    def check(value: Any) -> tuple[dict[str, Any], list[str]]:
        """A returned dict replaces the tool result (status, result, error, …)."""
        if not isinstance(value, dict):
            raise TypeError(f"must return a tool result dict or None, not {type(value).__name__}")
        result = ToolResult.model_validate(value)
        return {
            "toolCall": tool_call,
            "result": result.model_dump(mode="json", exclude_none=True),
        }, []

    return check
