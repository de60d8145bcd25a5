"""Prompt tools (Runtime §5.3): a prompt's own model loop, run inside the calling thread.

A call to a prompt tool stores the prompt's first user message (from the call's arguments),
then runs steps — one `model.call` with the prompt's model, system prompt and tools, then
its tool calls through the same `ToolRunner` — until the model answers without a tool call.
Every message it writes carries `parent_id` = the call and `depth` = one more than the
caller's, so it never joins the caller's transcript, and the caller gets one tool result
shaped by the include flags. The steps are the thread's: they count toward the session's
step cap, and each is a durable activity, so a worker that dies inside a prompt tool is
replaced by one that replays to the same point and carries on.

Old histories never take these paths: every earlier version refused prompt tools at
start-up, so no snapshot in them has a tool of kind "prompt" (no `workflow.patched`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from weft.contract.activities import ToolResult
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.definitions import ToolSpec
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Message, Side, ToolCall
from weft.contract.prompt_tools import PromptScope, PromptToolConfig
from weft.contract.thread import Counters
from weft.contract.tool_catalog import tool_entry
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.model_step import ModelCaller, PromptModelFailed
from weft.workflows.stop_rules import ToolOutcome
from weft.workflows.views import Identity, Stopped, Transcript


class NestedTools(Protocol):
    """What a prompt tool needs to run its model's tool calls: the thread's tool runner."""

    async def run_calls(
        self,
        calls: list[ToolCall],
        *,
        side: Side,
        turn_id: str,
        step_id: str,
        scope: PromptScope | None = None,
    ) -> list[ToolOutcome]: ...


@dataclass(frozen=True)
class PromptToolOutcome:
    """The caller's one tool result, and whether a hook refused something inside."""

    result: ToolResult
    blocked: bool = False


@dataclass(frozen=True)
class Failure:
    """Why a prompt tool ended without an answer: an error code and the full text."""

    code: str
    text: str


class PromptView(Identity, Stopped, Transcript, Protocol):
    """What a prompt tool's own loop reads and counts of the thread."""

    @property
    def counters(self) -> Counters: ...

    @property
    def mcp(self) -> McpBook: ...

    def count_step(self, side: Side) -> None: ...

    def new_id(self, prefix: str) -> str: ...

    def is_terminated(self) -> bool: ...


class PromptToolRunner:
    """Runs prompt tools for one thread: the nested loop and the shaping of its result."""

    def __init__(self, mem: PromptView, agents: ActiveAgent, model: ModelCaller) -> None:
        self._mem = mem
        self._agents = agents
        self._model = model

    def refuse_unlisted(self, call: ToolCall, scope: PromptScope | None) -> ToolResult | None:
        """Inside a prompt tool only the tools its prompt lists run (and `read_output`)."""
        if scope is None:
            return None
        prompt = self._agents.snapshot().prompts[scope.prompt]
        listed = prompt.tool_names()
        name = call.function.name
        if name in listed or name == READ_OUTPUT_TOOL or self._mem.mcp.tool(prompt, name):
            return None
        return ToolResult(
            status="error",
            error=f"unknown tool {name!r}; available tools: {', '.join(listed) or '(none)'}",
            error_code="unknown_tool",
        )

    async def run(
        self,
        call: ToolCall,
        spec: ToolSpec,
        caller: PromptScope | None,
        *,
        side: Side,
        turn_id: str,
        tools: NestedTools,
    ) -> PromptToolOutcome:
        """Run the prompt tool `spec` for `call`, made by the main loop or by `caller`."""
        mem, snapshot = self._mem, self._agents.snapshot()
        prompt = snapshot.prompts[spec.target or spec.name]
        caller_prompt = snapshot.prompts[caller.prompt] if caller else self._agents.prompt(side)
        config = PromptToolConfig.model_validate(tool_entry(caller_prompt, prompt.name))
        try:
            content, attachments = _first_message(call, config)
        except InvalidArguments as err:
            return PromptToolOutcome(
                ToolResult(status="error", error=str(err), error_code="invalid_arguments")
            )
        scope = PromptScope(
            prompt=prompt.name,
            tool_call_id=call.id,
            depth=(caller.depth if caller else 0) + 1,
            caller_tool_call_id=caller.tool_call_id if caller else None,
            # The caller's conversation so far: everything it has before this call's result.
            caller_position=mem.counters.messages,
            include_chat=prompt.include_chat,
            include_past_tools=prompt.include_past_tools,
        )
        message = mem.new_message(
            role="user",
            content=content,
            side=side,
            turn_id=turn_id,
            attachments=attachments,
            **scope.message_fields(),
        )
        return await self._loop(scope, config, [message], side=side, turn_id=turn_id, tools=tools)

    async def _loop(
        self,
        scope: PromptScope,
        config: PromptToolConfig,
        new_messages: list[Message],
        *,
        side: Side,
        turn_id: str,
        tools: NestedTools,
    ) -> PromptToolOutcome:
        """Steps until the model answers without a tool call, the step cap, a failure or
        terminate. Never continues as new: that happens between the main loop's steps."""
        mem, cap = self._mem, self._mem.start.options.max_total_steps
        done: list[ToolOutcome] = []
        while True:
            if mem.is_terminated():
                failure = Failure("aborted", "not finished: the thread was terminated")
                return PromptToolOutcome(shape_result(scope.prompt, config, done, None, failure))
            if mem.counters.session_steps >= cap:
                failure = Failure(
                    "max_total_steps",
                    f"prompt tool {scope.prompt!r} stopped at the thread's step cap "
                    f"({cap} steps in a session) before it answered",
                )
                return PromptToolOutcome(shape_result(scope.prompt, config, done, None, failure))
            mem.count_step(side)
            step_id = mem.new_id("step")
            try:
                reply = await self._model.call(side, turn_id, step_id, new_messages, scope)
            except PromptModelFailed as failed:
                failure = Failure("model_failed", failed.text)
                return PromptToolOutcome(shape_result(scope.prompt, config, done, None, failure))
            new_messages = []
            if reply is None:
                # Terminated, or a before_* hook refused a message (the turn ends with it).
                blocked = mem.stop_reason == "hook_blocked" and not mem.is_terminated()
                failure = (
                    Failure("hook_blocked", mem.last_outcome or "a hook refused a message")
                    if blocked
                    else Failure("aborted", f"not finished: {_stopped(mem.stop_reason)}")
                )
                if mem.stop_reason == "budget_exhausted" and not mem.is_terminated():
                    failure = Failure("budget_exhausted", mem.last_outcome or "budget spent")
                result = shape_result(scope.prompt, config, done, None, failure)
                return PromptToolOutcome(result, blocked=blocked)
            calls = reply.message.tool_calls or []
            if not calls:
                result = shape_result(scope.prompt, config, done, reply.message.content, None)
                return PromptToolOutcome(result)
            outcomes = await tools.run_calls(
                calls, side=side, turn_id=turn_id, step_id=step_id, scope=scope
            )
            done += outcomes
            if any(o.blocked for o in outcomes):
                failure = Failure("hook_blocked", mem.last_outcome or "a hook refused a result")
                result = shape_result(scope.prompt, config, done, None, failure)
                return PromptToolOutcome(result, blocked=True)


def _stopped(stop_reason: str | None) -> str:
    # interrupt_turn stops a prompt tool's loop too (workflows/turn_interrupt.py).
    interrupted = stop_reason == "interrupted"
    return "the turn was interrupted" if interrupted else "the thread was terminated"


def shape_result(
    name: str,
    config: PromptToolConfig,
    calls: list[ToolOutcome],
    text: str | None,
    failure: Failure | None,
) -> ToolResult:
    """The caller's one tool result (pure).

    `includeTextResponse` adds the final answer as `response`; `includeToolCalls` adds
    `toolCalls` (name, arguments, status); `includeErrors` adds each failed call's error
    and the failure's own text; without it a failure says only that the prompt tool failed.
    """
    result: dict[str, Any] = {}
    if config.include_text_response and failure is None:
        result["response"] = text or ""
    if config.include_tool_calls:
        result["toolCalls"] = [_described(o, config.include_errors) for o in calls]
    if failure is None:
        return ToolResult(status="success", result=result)
    error = failure.text if config.include_errors else f"prompt tool {name!r} failed"
    return ToolResult(status="error", error=error, error_code=failure.code, result=result or None)


def with_scope(payload: dict[str, Any], scope: PromptScope | None) -> dict[str, Any]:
    """An event payload, naming the prompt tool's call when written inside one."""
    return {**payload, **scope.event_fields()} if scope else payload


def error_text(message: Message) -> str | None:
    """The error of a stored tool result message (None for a success)."""
    if message.tool_status != "error":
        return None
    try:
        stored = ToolResult.model_validate_json(message.content or "")
    except ValueError:  # a spilled result: its content is a preview
        return "error (the full result is in the thread's store)"
    return stored.error or "error"


def _described(outcome: ToolOutcome, with_errors: bool) -> dict[str, Any]:
    described: dict[str, Any] = {
        "name": outcome.call.function.name,
        "arguments": _arguments(outcome.call),
        "status": "success" if outcome.succeeded else "error",
    }
    if with_errors and not outcome.succeeded:
        described["error"] = outcome.error or "error"
    return described


class InvalidArguments(Exception):
    """The call's arguments cannot make the prompt's first message; the text says why."""


def _first_message(call: ToolCall, config: PromptToolConfig) -> tuple[str, list[str]]:
    """(content, attachments) of the prompt's first message, from the call's arguments."""
    name, prop = call.function.name, config.message_property()
    try:
        args = json.loads(call.function.arguments or "{}")
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise InvalidArguments(f"arguments of {name!r} must be a JSON object")
    content = args.get(prop)
    if not isinstance(content, str) or not content.strip():
        raise InvalidArguments(f"{name!r} needs a non-empty string argument {prop!r}: the request")
    files_prop = config.init_attachments_property
    files = (args.get(files_prop) if files_prop else None) or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise InvalidArguments(f"{files_prop!r} of {name!r} must be a list of file paths")
    return content, files


def _arguments(call: ToolCall) -> Any:
    try:
        return json.loads(call.function.arguments or "{}")
    except ValueError:  # shown as the model wrote them
        return call.function.arguments
