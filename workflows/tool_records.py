"""Tool results the workflow stores itself: results it produced without running the
tool (an agent tool's, a prompt tool's, a refusal) and failures, each a tool message in
the outbox with its `tool.result` or `tool.failed` event."""

from __future__ import annotations

from typing import Any, Protocol

from weft.contract.activities import ToolResult
from weft.contract.messages import Message, Side, ToolCall
from weft.contract.prompt_tools import PromptScope
from weft.workflows.prompt_tools import with_scope
from weft.workflows.views import Facts, Identity, Transcript


class RecordsView(Facts, Identity, Transcript, Protocol):
    """Writing tool messages: ids, positions and the message index."""


class ToolRecords:
    """Stores the tool messages and outcome events the workflow produces itself."""

    def __init__(self, mem: RecordsView) -> None:
        self._mem = mem

    def result(
        self,
        call: ToolCall,
        side: Side,
        turn_id: str,
        step_id: str,
        result: ToolResult,
        scope: PromptScope | None = None,
    ) -> None:
        """Store a result the workflow produced without running the tool."""
        if result.status == "error":
            self.failure(
                call,
                self._mem.new_id("msg"),
                self._mem.reserve_position(),
                side,
                turn_id,
                step_id,
                result.error or "error",
                code=result.error_code or "error",
                data=result.error_data,
                scope=scope,
                result=result,
            )
            return
        message_id, position = self._mem.new_id("msg"), self._mem.reserve_position()
        self._store_message(call, message_id, position, side, turn_id, result, scope)
        self._mem.emit(
            "tool.result",
            with_scope({"name": call.function.name, "status": "success"}, scope),
            turn_id=turn_id,
            step_id=step_id,
            tool_call_id=call.id,
        )

    def failure(
        self,
        call: ToolCall,
        message_id: str,
        position: int,
        side: Side,
        turn_id: str,
        step_id: str,
        text: str,
        *,
        code: str,
        data: Any = None,
        scope: PromptScope | None = None,
        result: ToolResult | None = None,
    ) -> None:
        # `result`: an error result the workflow produced whole (a prompt tool's, say).
        result = result or ToolResult(status="error", error=text, error_code=code, error_data=data)
        self._store_message(call, message_id, position, side, turn_id, result, scope)
        failed: dict[str, Any] = {"name": call.function.name, "errorCode": code, "message": text}
        if code != "permission_denied":
            ids = {"turn_id": turn_id, "tool_call_id": call.id}
            failed["incident"] = self._mem.incident(f"tool_{code}", text, **ids)
        self._mem.emit(
            "tool.failed",
            with_scope(failed, scope),
            turn_id=turn_id,
            step_id=step_id,
            tool_call_id=call.id,
        )

    def _store_message(
        self,
        call: ToolCall,
        message_id: str,
        position: int,
        side: Side,
        turn_id: str,
        result: ToolResult,
        scope: PromptScope | None = None,
    ) -> None:
        message = Message(
            id=message_id,
            thread_id=self._mem.thread_id,
            position=position,
            role="tool",
            content=result.model_dump_json(exclude_none=True),
            name=call.function.name,
            tool_call_id=call.id,
            created_at=int(self._mem.now().timestamp() * 1_000_000),
            tool_status=result.status,
            side=side,
            turn_id=turn_id,
            **(scope.message_fields() if scope else {}),
        )
        self._mem.index_message(message)
        self._mem.outbox_messages.append(message)
