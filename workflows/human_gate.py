"""Human-in-the-loop gates: the ask_human tool and tool permissions that ask a human.

An action waits on a durable condition (with a durable timer when it has a timeout), so
it survives worker restarts and can wait for days. Answers arrive through
`respond_action` (signal) or `respond_action_checked` (update); both go through
`check_response` (workflows/action_answers.py) so they accept and refuse exactly the same
answers.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any, Protocol

from pydantic import ValidationError
from temporalio import workflow

from weft.contract.actions import (
    ActionKind,
    ActionResolution,
    AskHumanOptions,
    Decision,
    PendingAction,
)
from weft.contract.activities import ToolResult
from weft.contract.carry_parts import ActionBook
from weft.contract.definitions import PromptDef
from weft.contract.messages import Side, ToolCall
from weft.contract.permissions import EffectivePolicy, Verdict, effective_policy, evaluate
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.outbox import Outbox
from weft.workflows.read_facts import SessionFacts, session_facts
from weft.workflows.views import Facts


class GateHost(Protocol):
    """What a gate needs from the workflow."""

    def set_waiting(self, kind: ActionKind | None) -> None:
        """Show that the thread waits on a human (status and search attribute), or not."""

    def turn_interrupted(self) -> bool:
        """Whether `interrupt_turn` stopped the running turn (its waits end at once)."""


class GateView(Facts, SessionFacts, Protocol):
    """What the gates read of the thread, and the action book they change."""

    @property
    def actions(self) -> ActionBook: ...


def expiry(mem: Facts, timeout: float | None) -> str | None:
    """When an action asked now with `timeout` seconds expires (ISO-8601 UTC), if it does."""
    if not timeout:
        return None
    return (mem.now() + timedelta(seconds=timeout)).isoformat().replace("+00:00", "Z")


class HumanGate:
    """Asks humans on behalf of a step's tool calls."""

    def __init__(self, mem: GateView, agents: ActiveAgent, host: GateHost, outbox: Outbox) -> None:
        self._mem = mem
        self._outbox = outbox
        self._agents = agents
        self._host = host

    def _own_prompt(self, side: Side, prompt: str | None = None) -> PromptDef:
        # The thread's own agent's prompt (not a handoff target's), as it always was; inside
        # a prompt tool, that prompt's (its tool options and permission rules).
        snapshot = self._agents.snapshot()
        return snapshot.prompts[prompt or snapshot.agent.side(side).prompt]

    # ---- ask_human -------------------------------------------------------------------

    async def ask_human(
        self, call: ToolCall, *, side: Side, turn_id: str, step_id: str, prompt: str | None = None
    ) -> ToolResult:
        """Wait for a human's answer to the model's question; it becomes the tool result."""
        args, error = _args(call)
        question = args.get("question")
        if error or not isinstance(question, str) or not question.strip():
            return ToolResult(
                status="error",
                error=error or "ask_human needs a non-empty string 'question'",
                error_code="invalid_args",
            )
        options = self._ask_options(side, prompt)
        action = self._action(
            "ask_human",
            call,
            turn_id,
            prompt=question,
            args=args,
            decisions=["answer", "deny"],
            timeout=options.timeout_seconds,
            on_timeout="answer" if options.default is not None else "deny",
        )
        resolution = await self.wait(action, step_id=step_id, default=options.default)
        if resolution.decision == "answer":
            return ToolResult(status="success", result=resolution.answer)
        if resolution.decided_by in ("terminate", "interrupt"):
            return ToolResult(
                status="error",
                error=f"not answered: {_stopped_by(resolution.decided_by)}",
                error_code="aborted",
            )
        if resolution.decided_by == "timeout":
            return ToolResult(
                status="error",
                error=f"no answer from a human within {options.timeout_seconds} s",
                error_code="timeout",
            )
        why = f": {resolution.reason}" if resolution.reason else ""
        return ToolResult(
            status="error", error=f"the human declined to answer{why}", error_code="declined"
        )

    def _ask_options(self, side: Side, prompt: str | None) -> AskHumanOptions:
        try:
            return AskHumanOptions.model_validate(
                self._own_prompt(side, prompt).tool_options("ask_human")
            )
        except ValidationError:
            return AskHumanOptions()  # validated when the definitions loaded

    # ---- permissions -----------------------------------------------------------------

    async def permit(
        self,
        call: ToolCall,
        *,
        side: Side,
        turn_id: str,
        step_id: str,
        prompt: str | None = None,
        mcp: bool = False,
    ) -> ToolResult | None:
        """None when the call may run; otherwise the error result that replaces it.

        `mcp`: the call names a catalogued MCP tool (in no snapshot, but just as known).
        """
        snapshot = self._agents.snapshot()
        policy = effective_policy(snapshot.agent, self._own_prompt(side, prompt))
        spec = snapshot.tools.get(call.function.name)
        if policy is None or (spec is None and not mcp) or (spec is not None and spec.builtin):
            # No policy; an unknown tool (tool.call answers it with an error); or a runtime
            # tool (lifecycle tools, ask_human).
            return None
        mem, name = self._mem, call.function.name
        args, _ = _args(call)
        verdict = evaluate(policy, name, args, mem.actions.session_allowed_tools)
        ids = {"turn_id": turn_id, "step_id": step_id, "tool_call_id": call.id}
        mem.emit("permission.evaluated", {"toolName": name, **verdict.describe()}, **ids)
        if verdict.decision == "allow":
            return None
        if verdict.decision == "deny":
            return _denied(name, verdict, policy)
        return await self._ask_permission(call, args, policy, turn_id, step_id)

    async def _ask_permission(
        self,
        call: ToolCall,
        args: dict[str, Any],
        policy: EffectivePolicy,
        turn_id: str,
        step_id: str,
    ) -> ToolResult | None:
        mem, name = self._mem, call.function.name
        action = self._action(
            "tool_permission",
            call,
            turn_id,
            prompt=f"Allow {name} with {json.dumps(args, sort_keys=True)[:500]}?",
            args=args,
            decisions=["approve", "deny"],
            timeout=policy.ask_timeout_seconds,
            on_timeout=policy.on_timeout,
        )
        ids = {"turn_id": turn_id, "step_id": step_id, "tool_call_id": call.id}
        mem.emit(
            "permission.requested",
            {"toolName": name, "prompt": action.prompt, "timeoutSeconds": action.timeout_seconds},
            action_id=action.action_id,
            **ids,
        )
        resolution = await self.wait(action, step_id=step_id)
        allowed = resolution.decision == "approve"
        if allowed and resolution.scope == "session":
            mem.actions.session_allowed_tools.add(name)
        mem.emit(
            "permission.resolved",
            {
                "toolName": name,
                "decision": "allow" if allowed else "deny",
                "decidedBy": resolution.decided_by,
                "scope": resolution.scope,
            },
            action_id=action.action_id,
            **ids,
        )
        if allowed:
            return None
        if resolution.decided_by in ("terminate", "interrupt"):
            return ToolResult(
                status="error",
                error=f"not run: {_stopped_by(resolution.decided_by)}",
                error_code="aborted",
            )
        if resolution.decided_by == "timeout":
            text = f"permission denied: nobody answered within {action.timeout_seconds} s"
        else:
            why = f": {resolution.reason}" if resolution.reason else ""
            text = f"permission denied by a human{why}"
        return ToolResult(status="error", error=text, error_code="permission_denied")

    # ---- waiting ---------------------------------------------------------------------

    def _action(
        self,
        kind: ActionKind,
        call: ToolCall,
        turn_id: str,
        *,
        prompt: str,
        args: dict[str, Any],
        decisions: list[Decision],
        timeout: float | None,
        on_timeout: str,
    ) -> PendingAction:
        mem = self._mem
        expires = expiry(mem, timeout)
        return PendingAction(
            action_id=mem.new_id("act"),
            kind=kind,
            tool_call_id=call.id,
            tool_name=call.function.name,
            turn_id=turn_id,
            prompt=prompt,
            args=args,
            decisions=decisions,
            requested_at=mem.timestamp(),
            timeout_seconds=timeout,
            expires_at=expires,
            on_timeout=on_timeout if timeout else None,
        )

    async def wait(
        self, action: PendingAction, *, step_id: str, default: Any = None
    ) -> ActionResolution:
        """Publish the action, wait for an answer, a timeout, terminate or interrupt_turn;
        emit the result."""
        mem, host, action_id = self._mem, self._host, action.action_id
        ids = {
            "turn_id": action.turn_id,
            "step_id": step_id,
            "tool_call_id": action.tool_call_id,
            "action_id": action_id,
        }
        mem.actions.pending[action_id] = action
        # The thread stops here until a person answers: its counters and context as they are.
        mem.emit("action.required", {**_required_payload(action), **session_facts(mem)}, **ids)
        host.set_waiting(action.kind)
        # Written now, so clients tailing events see the request while the thread waits.
        await self._outbox.flush(with_thread_row=True)
        try:
            await workflow.wait_condition(
                lambda: (
                    action_id in mem.actions.resolved
                    or mem.is_terminated()
                    or host.turn_interrupted()
                ),
                timeout=timedelta(seconds=action.timeout_seconds)
                if action.timeout_seconds
                else None,
            )
        except TimeoutError:
            pass
        # An answer that arrived in the same activation as the timer or terminate wins.
        incident = None
        if action_id not in mem.actions.resolved:
            if mem.is_terminated():
                mem.actions.resolved[action_id] = self._resolution(action, "deny", "terminate")
            elif host.turn_interrupted():
                # Nothing waits on it any more: denied, as the turn that asked has stopped.
                mem.actions.resolved[action_id] = self._resolution(action, "deny", "interrupt")
            else:
                mem.actions.resolved[action_id] = self._timed_out(action, default)
                text = f"{action.kind} {action_id} timed out"
                incident = mem.incident("action_timeout", text, **ids)
        resolution = mem.actions.resolved[action_id]
        del mem.actions.pending[action_id]
        # Another action may still wait (an MCP elicitation comes mid-call, beside any other).
        host.set_waiting(
            next(iter(mem.actions.pending.values())).kind if mem.actions.pending else None
        )
        resolved = _resolved_payload(action, resolution)
        if incident is not None:  # the log states it, for a read model rebuilt from it
            resolved["incident"] = incident
        mem.emit("action.resolved", resolved, **ids)
        return resolution

    def _timed_out(self, action: PendingAction, default: Any) -> ActionResolution:
        if action.on_timeout == "answer":
            return self._resolution(action, "answer", "timeout", answer=default)
        if action.on_timeout == "approve":
            return self._resolution(action, "approve", "timeout")
        return self._resolution(action, "deny", "timeout")

    def _resolution(
        self, action: PendingAction, decision: Decision, by: Any, *, answer: Any = None
    ) -> ActionResolution:
        return ActionResolution(
            action_id=action.action_id,
            kind=action.kind,
            decision=decision,
            decided_by=by,
            answer=answer,
            resolved_at=self._mem.timestamp(),
        )


def _required_payload(action: PendingAction) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "actionType": action.kind,
        "toolName": action.tool_name,
        "decisionKind": "approve_or_deny" if action.kind == "tool_permission" else "answer",
        "decisions": action.decisions,
        "prompt": action.prompt,
        "args": action.args,
        "requestedAt": action.requested_at,  # with the ids above: the whole pending action
    }
    if action.kind == "tool_permission":
        payload["scopes"] = ["once", "session"]
    if action.timeout_seconds:
        payload.update(
            timeoutSeconds=action.timeout_seconds,
            expiresAt=action.expires_at,
            onTimeout=action.on_timeout,
        )
    return payload


def _resolved_payload(action: PendingAction, resolution: ActionResolution) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "actionType": action.kind,
        "toolName": action.tool_name,
        "decision": resolution.decision,
        "decidedBy": resolution.decided_by,
        "timedOut": resolution.decided_by == "timeout",
        "scope": resolution.scope,
    }
    if resolution.answer is not None:
        payload["answer"] = resolution.answer
    if resolution.reason:
        payload["reason"] = resolution.reason
    return payload


def _stopped_by(decided_by: str) -> str:
    return "the turn was interrupted" if decided_by == "interrupt" else "the thread was terminated"


def _denied(name: str, verdict: Verdict, policy: EffectivePolicy) -> ToolResult:
    if verdict.decided_by == "rule" and verdict.rule is not None:
        rule = verdict.rule
        why = f": {rule['reason']}" if rule.get("reason") else ""
        text = f"permission denied for {name} by {rule['origin']} rule {rule['index']}{why}"
    else:
        text = (
            f"permission denied for {name}: mode {policy.mode!r} runs no tool without an allow rule"
        )
    return ToolResult(status="error", error=text, error_code="permission_denied")


def _args(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    try:
        parsed = json.loads(call.function.arguments or "{}")
    except json.JSONDecodeError as err:
        return {}, f"tool arguments are not valid JSON: {err}"
    if not isinstance(parsed, dict):
        return {}, "tool arguments must be a JSON object"
    return parsed, None
