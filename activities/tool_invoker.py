"""ThreadState's `invoke_tool`: run a function tool now, inside the calling activity.

The invoked tool passes the thread's permission policy as a model's call would (a `deny`
is an error result naming the rule; an `ask` is refused, since no human can answer inside
an activity: `queue_tool` asks), validates its arguments like any call, and gets a
ThreadState of its own whose intents join the caller's. Only function tools run here:
agent and prompt tools are the workflow's, runtime tools only mark a step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from weft.activities.spans import Spans
from weft.activities.thread_scope import ThreadScope
from weft.activities.tool_execute import ToolState, error_result, execute_tool
from weft.contract.activities import ToolResult
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.definitions import DefinitionSnapshot, PromptDef, ToolSpec

# Pure functions of the workflow's permission policy: the same verdicts in both places.
from weft.contract.permissions import Verdict, effective_policy, evaluate
from weft.definitions import Definitions, FunctionTool

# A tool invoking a tool invoking a tool ... is refused past this many levels.
MAX_INVOKE_DEPTH = 4
_WORKFLOW_KINDS = {
    "subagent": "a subagent tool (it starts or messages another thread)",
    "subagent_create": "a subagent tool (it starts another thread)",
    "subagent_message": "a subagent tool (it messages another thread)",
    "handoff": "a handoff tool (it changes the agent running the thread)",
    "prompt": "a prompt tool (it runs a model)",
}


class ToolInvocationUnavailable(RuntimeError):
    """`invoke_tool` where no worker tools are at hand (a hook outside `tool.call`)."""


@dataclass(frozen=True, kw_only=True)
class ToolInvoker:
    """What `invoke_tool` needs from the activity that runs the calling tool: the worker's
    tools, the thread's snapshot, the prompt whose permission policy applies (the one the
    workflow's gate uses for a model's call), the running tool call and the nesting depth."""

    definitions: Definitions
    snapshot: DefinitionSnapshot
    prompt: PromptDef
    running_call_id: str
    tool: str
    depth: int = 0
    spans: Spans = field(default_factory=Spans)

    def nested(self, tool: str) -> ToolInvoker:
        """The invoker the invoked `tool` gets: one level deeper."""
        return replace(self, tool=tool, depth=self.depth + 1)

    def function_tools(self) -> list[str]:
        """The snapshot's function tools this worker can run, by name."""
        return sorted(
            name
            for name, spec in self.snapshot.tools.items()
            if spec.kind == "function" and not spec.builtin and name in self.definitions.tools
        )

    def resolve(self, name: str) -> FunctionTool | ToolResult:
        """The function tool `name`, or the error result saying why it cannot run here."""
        available = ", ".join(self.function_tools()) or "(none)"
        spec: ToolSpec | None = self.snapshot.tools.get(name)
        if spec is None and name != READ_OUTPUT_TOOL:
            return error_result(
                "unknown_tool", f"unknown tool {name!r}; function tools here: {available}"
            )
        why = None
        if spec is None or spec.builtin or spec.kind == "lifecycle":
            why = "a runtime tool, which weft answers itself (ask_human, lifecycle, read_output)"
        elif spec.kind in _WORKFLOW_KINDS:
            why = f"{_WORKFLOW_KINDS[spec.kind]} that the workflow runs; use queue_tool"
        if why is not None:
            return error_result(
                "tool_not_invokable",
                f"invoke_tool runs function tools only, and {name!r} is {why}; "
                f"function tools here: {available}",
            )
        tool = self.definitions.tools.get(name)
        if tool is None:
            return error_result(
                "tool_unavailable",
                f"tool {name!r} is in this thread's definitions but not on this worker",
            )
        return tool

    def permission(self, name: str, args: dict[str, Any]) -> Verdict | None:
        """The policy's verdict on calling `name` with `args`; None without a policy.

        Session approvals live in the workflow, so an `ask` stays an ask here.
        """
        policy = effective_policy(self.snapshot.agent, self.prompt)
        return None if policy is None else evaluate(policy, name, args, set())


# Builds the ThreadState an invoked tool gets over its scope (tool_state.py); a parameter,
# so this module need not know ThreadState.
InvokedState = Callable[[ThreadScope, ToolInvoker], ToolState]


class ToolInvocations:
    """`invoke_tool` of ThreadState (Standard Agents `invokeTool`)."""

    def __init__(
        self, scope: ThreadScope, invoker: ToolInvoker | None, *, state_for: InvokedState
    ) -> None:
        """`invoker` runs the tools (None where no worker tools are at hand: hooks);
        `state_for` builds an invoked tool's ThreadState."""
        self._scope = scope
        self._invoker = invoker
        self._state_for = state_for

    async def invoke_tool(self, name: str, args: dict[str, Any] | None = None) -> ToolResult:
        """Run the function tool `name` with `args` now and return its result.

        It passes the thread's permission policy first: `deny` and `ask` (which needs a
        human, so use `queue_tool`) come back as error results, as do unknown, agent,
        prompt and runtime tools and invalid arguments. The tool gets a ThreadState of its
        own; the changes it asks for (intents) join this tool's. Its result is not stored
        as a message: it is this tool's to use.
        """
        invoker, scope = self._invoker, self._scope
        if invoker is None:
            where = scope.intents.unavailable_in or "this activity"
            raise ToolInvocationUnavailable(
                f"invoke_tool is not available to hooks in {where}: no worker tools are at "
                "hand there (call it from a tool, or from a tool.call hook)"
            )
        nested = scope.nested(f"{scope.event_prefix}:invoke{scope.number('invoke')}")
        arguments = {} if args is None else args
        by = {"invokedBy": {"toolCallId": scope.tool_call_id, "tool": invoker.tool}}
        started = {"name": name, "arguments": arguments, **by}
        await nested.append([nested.event("tool.started", "started", started)])
        if invoker.depth >= MAX_INVOKE_DEPTH:
            result = error_result(
                "invoke_depth_exceeded",
                f"invoke_tool({name!r}) refused: tools may invoke tools {MAX_INVOKE_DEPTH} "
                "levels deep at most",
            )
        else:
            result = await self._run(nested, name, arguments, invoker.nested(name))
        scope.intents.join(nested.intents.intents)
        outcome = "tool.result" if result.status == "success" else "tool.failed"
        details = {"status": result.status, "error": result.error, "errorCode": result.error_code}
        await nested.append([nested.event(outcome, "done", {"name": name, **details, **by})])
        return result

    async def _run(
        self, nested: ThreadScope, name: str, args: Any, invoker: ToolInvoker
    ) -> ToolResult:
        """Resolve, check and run `name` as the invoked tool, in `nested`."""
        if not isinstance(args, dict):
            return error_result(
                "invalid_arguments",
                f"arguments of {name!r} must be a dict, not {type(args).__name__}",
            )
        tool = invoker.resolve(name)
        if isinstance(tool, ToolResult):
            return tool
        refusal = await _permission(nested, name, args, invoker)
        if refusal is not None:
            return refusal
        state = self._state_for(nested, invoker)
        return await execute_tool(tool, args, state, spans=invoker.spans)


async def _permission(
    nested: ThreadScope, name: str, args: dict[str, Any], invoker: ToolInvoker
) -> ToolResult | None:
    verdict = invoker.permission(name, args)
    if verdict is None:
        return None
    record = nested.event(
        "permission.evaluated", "permission", {"toolName": name, **verdict.describe()}
    )
    await nested.append([record])
    if verdict.decision == "allow":
        return None
    by = _decided_by(verdict)
    if verdict.decision == "deny":
        return error_result("permission_denied", f"permission denied for {name} by {by}")
    return error_result(
        "permission_required",
        f"{name} needs a human's approval ({by}), which invoke_tool cannot wait for; "
        "use queue_tool to run it through the normal tool flow, which asks",
    )


def _decided_by(verdict: Verdict) -> str:
    rule = verdict.rule
    if verdict.decided_by == "rule" and rule is not None:
        why = f": {rule['reason']}" if rule.get("reason") else ""
        return f"{rule['origin']} rule {rule['index']}{why}"
    return f"permission mode {verdict.mode!r}"
