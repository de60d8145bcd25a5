"""Subagents on the parent's side (Runtime §7, §8.1, §10): spawning, the registry, reports.

A subagent is a child `AgentThread` workflow. Temporal links parent and child (the UI
shows both), retries the child's activities and replays it; this module only decides what
to start and keeps the registry. The parent close policy is ABANDON: a parent that
continues as new must not take its children with it, so `terminate` is propagated by the
runtime itself (`propagate_terminate`), as Runtime §10 asks.

Agent tools (subagents, handoffs, `subagent_create`, `subagent_message`) run in the
workflow, not in an activity: what they do is start, signal or await workflows.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from contract.activities import (
    ACTIVITY_FILES_COPY,
    CopyFilesInput,
    CopyFilesResult,
    ToolResult,
)
from contract.definitions import ToolSpec
from contract.messages import Message, QueuedMessage, Side, ToolCall
from contract.subagents import (
    ACTIVITY_VARIABLES_REQUEST,
    ERROR_MAX_INSTANCES,
    ERROR_SUBAGENT_FAILED,
    ERROR_UNKNOWN_SUBAGENT,
    ERROR_VARIABLES_REQUIRED,
    SIGNAL_SUBAGENT_REPORT,
    SIGNAL_VARIABLES_PROVIDED,
    ParentLink,
    RegistryEntry,
    SubagentReport,
    SubagentToolConfig,
    VariableRequest,
    VariablesProvided,
)
from contract.thread import SIGNAL_QUEUE_MESSAGE, SIGNAL_TERMINATE, WORKFLOW_TYPE, ThreadStartInput
from contract.thread_env import EnvEntry, merge_env
from contract.tool_catalog import enabled_subagents, handoff_config
from workflows import search_attributes
from workflows.control import parse_single
from workflows.thread_base import ThreadBase

_LIVE = ("starting", "running", "idle")
# How long a terminated parent waits for its children to confirm they closed.
CHILD_CLOSE_TIMEOUT = timedelta(seconds=60)


class SubagentHost(ThreadBase):
    """The parent's half of subagents: a base of the workflow class."""

    # ---- the tools the workflow runs itself ------------------------------------------

    async def run_agent_tool(
        self, call: ToolCall, spec: ToolSpec, *, side: Side, turn_id: str, step_id: str
    ) -> ToolResult:
        """Run a subagent, handoff, `subagent_create` or `subagent_message` call."""
        name = call.function.name
        try:
            args = json.loads(call.function.arguments or "{}")
        except ValueError as err:
            return _error("invalid_arguments", f"arguments of {name!r} are not valid JSON: {err}")
        if not isinstance(args, dict):
            return _error("invalid_arguments", f"arguments of {name!r} must be a JSON object")
        if spec.kind == "handoff":
            return self._handoff(call, spec, args, turn_id=turn_id, step_id=step_id)
        configs = enabled_subagents(
            self._require_snapshot(), self._active_prompt(side), self._env(side)
        )
        if spec.kind == "subagent":
            config = configs.get(spec.target or name)
            if config is None or config.resumable is not False:
                return _error(ERROR_UNKNOWN_SUBAGENT, f"subagent {name!r} is not enabled here")
            return await self._call_subagent(config, args, call, turn_id=turn_id)
        if spec.kind == "subagent_create":
            return await self._subagent_create(configs, args, call, turn_id=turn_id)
        return await self._subagent_message(args, call, turn_id=turn_id)

    async def _call_subagent(
        self, config: SubagentToolConfig, args: dict[str, Any], call: ToolCall, *, turn_id: str
    ) -> ToolResult:
        message = args.get(config.message_property())
        if not isinstance(message, str) or not message.strip():
            return _error(
                "invalid_arguments",
                f"{config.name!r} needs a non-empty string argument "
                f"{config.message_property()!r}: the task for the subagent",
            )
        attachments = _paths(args, config.init_attachments_property)
        if isinstance(attachments, str):
            return _error("invalid_arguments", attachments)
        label = args.get(config.init_agent_name_property or "") or config.name
        spawned = await self._spawn(
            config,
            message=message,
            attachments=attachments,
            name=str(label),
            description=None,
            tool=config.name,
            tool_call_id=call.id,
            arguments=args,
            turn_id=turn_id,
        )
        if isinstance(spawned, ToolResult):
            return spawned
        if not config.blocking:
            return _started(spawned)
        return self._result_of(spawned, await self._await_report(spawned.reference))

    async def _subagent_create(
        self,
        configs: dict[str, SubagentToolConfig],
        args: dict[str, Any],
        call: ToolCall,
        *,
        turn_id: str,
    ) -> ToolResult:
        resumable = {n: c for n, c in configs.items() if c.resumable is not False}
        agent = args.get("agent")
        if agent is None and len(resumable) == 1:
            agent = next(iter(resumable))
        config = resumable.get(str(agent))
        if config is None or config.resumable is False:
            return _error(
                ERROR_UNKNOWN_SUBAGENT,
                f"subagent_create: unknown agent {agent!r}; resumable subagents here: "
                f"{', '.join(sorted(resumable)) or '(none)'}",
            )
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            return _error(
                "invalid_arguments", "subagent_create needs a non-empty `name` for the subagent"
            )
        name = name.strip()
        live = [e for e in self._children.values() if e.agent == config.name and not e.closed]
        taken = next((e for e in live if e.name == name), None)
        if taken is not None:
            return _error(
                "name_taken",
                f"a {config.name} subagent named {name!r} already exists (reference "
                f"{taken.reference}); send it work with subagent_message, or pick another name",
            )
        limit = config.resumable.max_instances
        if limit is not None and len(live) >= limit:
            listed = ", ".join(f"{e.name!r} ({e.reference}, {e.status})" for e in live)
            return ToolResult(
                status="error",
                error_code=ERROR_MAX_INSTANCES,
                error=f"cannot create another {config.name} subagent: maxInstances is {limit} "
                f"and these are live: {listed}. Reuse one with subagent_message "
                "(reference or name), or wait until one finishes.",
                error_data={
                    "maxInstances": limit,
                    "instances": [{"reference": e.reference, "name": e.name} for e in live],
                },
            )
        message = args.get("message")
        if message is not None and not isinstance(message, str):
            return _error("invalid_arguments", "subagent_create: `message` must be a string")
        attachments = _paths(args, "attachments")
        if isinstance(attachments, str):
            return _error("invalid_arguments", attachments)
        spawned = await self._spawn(
            config,
            message=message or None,
            attachments=attachments,
            name=name,
            description=args.get("description")
            if isinstance(args.get("description"), str)
            else None,
            tool="subagent_create",
            tool_call_id=call.id,
            arguments=args,
            turn_id=turn_id,
        )
        if isinstance(spawned, ToolResult):
            return spawned
        if not config.blocking or not message:
            return _started(spawned)
        return self._result_of(spawned, await self._await_report(spawned.reference))

    async def _subagent_message(
        self, args: dict[str, Any], call: ToolCall, *, turn_id: str
    ) -> ToolResult:
        wanted, message = args.get("reference"), args.get("message")
        entry = self._find_child(wanted)
        if entry is None:
            known = ", ".join(f"{e.name!r} ({e.reference})" for e in self._children.values())
            return _error(
                ERROR_UNKNOWN_SUBAGENT,
                f"subagent_message: no subagent {wanted!r}; known: {known or '(none)'}",
            )
        if not isinstance(message, str) or not message.strip():
            return _error("invalid_arguments", "subagent_message needs a non-empty `message`")
        if entry.closed or entry.status not in _LIVE:
            return _error(
                "subagent_closed",
                f"subagent {entry.name!r} ({entry.reference}) is {entry.status} and takes no "
                "more messages; create a new one with subagent_create",
            )
        attachments = _paths(args, "attachments")
        if isinstance(attachments, str):
            return _error("invalid_arguments", attachments)
        try:
            copied = await self._copy_files(entry.reference, attachments, f"{call.id}:in")
        except _MissingFile as err:
            return _error("attachment_not_found", str(err))
        role = "assistant" if entry.receives_messages == "side_b" else "user"
        outgoing = QueuedMessage(role=role, content=message, attachments=copied)
        await workflow.get_external_workflow_handle(entry.reference).signal(
            SIGNAL_QUEUE_MESSAGE, outgoing.model_dump(mode="json", by_alias=True)
        )
        self._set_child_status(entry, "running")
        self._emit_child("subagent.input", entry, turn_id=turn_id, messageChars=len(message))
        if not entry.blocking:
            return _started(entry)
        return self._result_of(entry, await self._await_report(entry.reference))

    def _handoff(
        self, call: ToolCall, spec: ToolSpec, args: dict[str, Any], *, turn_id: str, step_id: str
    ) -> ToolResult:
        """Runtime §5.3: an ai_human agent called as a tool takes over this same thread."""
        snapshot = self._require_snapshot()
        target = spec.target or call.function.name
        previous = self._agent().name
        config = handoff_config(self._active_prompt("a"), target)
        note = args.get(config.init_user_message_property or "message")
        self._active_agent = None if target == snapshot.agent.name else target
        self._require_mem().emit(
            "thread.updated",
            {"handoff": {"from": previous, "to": target, "note": note}},
            turn_id=turn_id,
            step_id=step_id,
            tool_call_id=call.id,
        )
        search_attributes.upsert_agent(target)
        return ToolResult(
            status="success",
            result={"handedOffTo": target, "from": previous, "note": note},
        )

    # ---- immediate subagents (Runtime §7.3) ------------------------------------------

    async def start_immediate(
        self, side: Side, turn_id: str, new_messages: list[Message]
    ) -> list[Message]:
        """Start the active prompt's `immediate` subagents before its first model step.

        Each child gets the newest queued text as its first message. A blocking one is
        awaited and its payload joins this step's new messages; a non-blocking one reports
        later, like any subagent. Children run their own immediates the same way, which
        makes the activation recursive.
        """
        prompt = self._active_prompt(side)
        if prompt.name in self._immediate_done:
            return new_messages
        self._immediate_done.add(prompt.name)
        mem, env = self._require_mem(), self._env(side)
        trigger = next((m.content for m in reversed(new_messages) if m.content), None)
        added: list[Message] = []
        for config in enabled_subagents(self._require_snapshot(), prompt, env).values():
            immediate = config.immediate_config()
            if immediate is None:
                continue
            name = _env_text(env, immediate.name_env) or config.name
            spawned = await self._spawn(
                config,
                message=trigger,
                attachments=[],
                name=name,
                description=_env_text(env, immediate.description_env),
                tool=config.name,
                tool_call_id=None,
                arguments={},
                turn_id=turn_id,
            )
            if isinstance(spawned, ToolResult):
                text = f"Immediate subagent {config.name!r} did not start: {spawned.error}"
            elif config.blocking and trigger:
                result = self._result_of(spawned, await self._await_report(spawned.reference))
                text = f"Immediate subagent {name!r} ({spawned.reference}) answered: " + (
                    json.dumps(result.result) if result.status == "success" else str(result.error)
                )
            else:
                continue
            added.append(
                mem.new_message(
                    role="user",
                    content=text,
                    side=None,
                    turn_id=turn_id,
                    metadata={"subagent": {"name": name, "kind": "immediate"}},
                )
            )
        return [*new_messages, *added]

    # ---- spawning --------------------------------------------------------------------

    async def _spawn(
        self,
        config: SubagentToolConfig,
        *,
        message: str | None,
        attachments: list[str],
        name: str,
        description: str | None,
        tool: str,
        tool_call_id: str | None,
        arguments: dict[str, Any],
        turn_id: str | None,
        scoped_env_request: str | None = None,
    ) -> RegistryEntry | ToolResult:
        """Start a child thread for `config`; a ToolResult when it cannot start."""
        mem, snapshot = self._require_mem(), self._require_snapshot()
        env = self._env(self._active_side or "a")
        scoped = {
            n: {"value": env[n].value, "type": "secret"}
            for n in config.required_scoped_env()
            if n in env
        }
        missing = [n for n in config.required_scoped_env() if n not in env]
        if missing and scoped_env_request is None:
            return await self._defer(
                config,
                missing,
                message,
                attachments,
                name,
                description,
                tool,
                tool_call_id,
                arguments,
            )
        reference = mem.new_id("thread")
        try:
            copied = await self._copy_files(reference, attachments, f"{reference}:in")
        except _MissingFile as err:
            return _error("attachment_not_found", str(err))
        resumable = config.resumable
        receives = resumable.receives_messages if resumable is not False else "side_a"
        role = "assistant" if receives == "side_b" else "user"
        start = self._require_start()
        child = ThreadStartInput(
            agent=config.name,
            messages=[QueuedMessage(role=role, content=message, attachments=copied)]
            if message
            else [],
            env=scoped,
            user_id=start.user_id,
            parent=ParentLink(
                thread_id=mem.thread_id,
                tool_call_id=tool_call_id,
                name=name,
                description=description,
                tool=tool,
                resumable=resumable is not False,
                blocking=config.blocking,
                parent_communication=(
                    resumable.parent_communication if resumable is not False else "implicit"
                ),
            ),
            arguments=arguments,
            scoped_env_request=scoped_env_request,
            options=start.options,
        )
        agent = snapshot.agents.get(config.name)
        entry = RegistryEntry(
            reference=reference,
            name=name,
            description=description or (agent.description if agent else None),
            resumable=resumable is not False,
            blocking=config.blocking,
            status="starting",
            parent_communication=child.parent.parent_communication if child.parent else "implicit",
            created_at=mem.timestamp(),
            agent=config.name,
            tool=tool,
            tool_call_id=tool_call_id,
            receives_messages=receives,
        )
        self._children[reference] = entry
        try:
            handle = await workflow.start_child_workflow(
                WORKFLOW_TYPE,
                child.model_dump(mode="json", by_alias=True, exclude_none=True),
                id=reference,
                task_queue=workflow.info().task_queue,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
        except Exception as err:  # any start failure becomes a tool error
            del self._children[reference]
            return _error(ERROR_SUBAGENT_FAILED, f"subagent {name!r} could not start: {err}")
        # A resumable child started without a task waits for subagent_message.
        self._set_child_status(entry, "running" if message else "idle", quiet=True)
        self._watchers.append(asyncio.create_task(self._watch(entry, handle)))
        self._emit_child("subagent.spawned", entry, turn_id=turn_id)
        return entry

    async def _watch(self, entry: RegistryEntry, handle: Any) -> None:
        """Close the registry entry when the child workflow ends, reported or not."""
        failure: str | None = None
        try:
            await handle
        except ChildWorkflowError as err:
            failure = _failure_text(err)
        if entry.closed:
            return
        report = SubagentReport(
            reference=entry.reference,
            kind="closed",
            report_id=f"{entry.reference}:watch",
            status="failed" if failure else "terminated",
            content=failure,
        )
        self._apply_report(report)

    async def _copy_files(self, target: str, paths: list[str], copy_id: str) -> list[str]:
        """Copy this thread's files into `target`'s filesystem (Runtime §8.1)."""
        if not paths:
            return []
        try:
            result: CopyFilesResult = await workflow.execute_activity(
                ACTIVITY_FILES_COPY,
                CopyFilesInput(
                    source_thread_id=self._require_mem().thread_id,
                    target_thread_id=target,
                    paths=paths,
                    copy_id=copy_id,
                ),
                result_type=CopyFilesResult,
                start_to_close_timeout=timedelta(seconds=60),
            )
        except ActivityError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == "FileNotFound":
                raise _MissingFile(cause.message) from None
            raise
        return result.paths

    # ---- scoped variable bootstrap (Runtime §7.5) ------------------------------------

    async def _defer(
        self,
        config: SubagentToolConfig,
        missing: list[str],
        message: str | None,
        attachments: list[str],
        name: str,
        description: str | None,
        tool: str,
        tool_call_id: str | None,
        arguments: dict[str, Any],
    ) -> ToolResult:
        mem = self._require_mem()
        request = VariableRequest(
            request_id=mem.new_id("varreq"),
            parent_thread_id=mem.thread_id,
            tool_call_id=tool_call_id,
            subagent=config.name,
            name=name,
            missing=missing,
            created_at=mem.timestamp(),
        )
        await workflow.execute_local_activity(
            ACTIVITY_VARIABLES_REQUEST, request, start_to_close_timeout=timedelta(seconds=30)
        )
        self._variable_requests[request.request_id] = {
            "config": config.name,
            "message": message,
            "attachments": attachments,
            "name": name,
            "description": description,
            "tool": tool,
            "toolCallId": tool_call_id,
            "arguments": arguments,
        }
        path = f"/threads/{mem.thread_id}/variables/{request.request_id}"
        mem.emit(
            "action.required",
            {
                "actionId": request.request_id,
                "kind": "scoped_variables",
                "missing": missing,
                "path": path,
            },
            tool_call_id=tool_call_id,
        )
        return ToolResult(
            status="error",
            error_code=ERROR_VARIABLES_REQUIRED,
            error=f"subagent {config.name!r} needs scoped variables this thread does not have: "
            f"{', '.join(missing)}. Ask the user to provide them (GET/POST {path} on the weft "
            "gateway); the subagent starts as soon as they are stored, and its reference "
            "arrives as a message.",
            error_data={"requestId": request.request_id, "missing": missing, "path": path},
        )

    def _on_variables_provided(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_VARIABLES_PROVIDED, values, VariablesProvided)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_VARIABLES_PROVIDED, parsed)
            return
        deferred = self._variable_requests.pop(parsed.request_id, None)
        if deferred is None:
            self._warn(
                "unknown_variable_request",
                SIGNAL_VARIABLES_PROVIDED,
                f"no deferred subagent waits on request {parsed.request_id!r}",
            )
            return
        if self._refuse_when_terminated(SIGNAL_VARIABLES_PROVIDED):
            return
        self._background.append(asyncio.create_task(self._boot(parsed.request_id, deferred)))

    async def _boot(self, request_id: str, deferred: dict[str, Any]) -> None:
        """Start a deferred subagent now that its values are stored; tell the parent."""
        mem, snapshot = self._require_mem(), self._require_snapshot()
        config = next(
            (
                c
                for prompt in snapshot.prompts.values()
                for n, c in enabled_subagents(snapshot, prompt, self._env("a")).items()
                if n == deferred["config"]
            ),
            None,
        )
        spawned: RegistryEntry | ToolResult
        if config is None:
            spawned = _error(ERROR_UNKNOWN_SUBAGENT, f"subagent {deferred['config']!r} is gone")
        else:
            spawned = await self._spawn(
                config,
                message=deferred["message"],
                attachments=deferred["attachments"],
                name=deferred["name"],
                description=deferred["description"],
                tool=deferred["tool"],
                tool_call_id=deferred["toolCallId"],
                arguments=deferred["arguments"],
                turn_id=None,
                scoped_env_request=request_id,
            )
        mem.emit("action.resolved", {"actionId": request_id, "kind": "scoped_variables"})
        if isinstance(spawned, ToolResult):
            text = f"The deferred subagent {deferred['name']!r} could not start: {spawned.error}"
        else:
            text = (
                f"Subagent {spawned.name!r} (reference {spawned.reference}) started after its "
                "scoped variables were provided."
            )
        if not self._terminated_at:
            self._queue_message(
                QueuedMessage(
                    role="user",
                    content=text,
                    metadata={"subagent": {"requestId": request_id, "kind": "bootstrap"}},
                )
            )

    # ---- reports from children (Runtime §8.2, §8.3) ----------------------------------

    def _on_subagent_report(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_SUBAGENT_REPORT, values, SubagentReport)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_SUBAGENT_REPORT, parsed)
        elif parsed.reference not in self._children:
            self._warn(
                "unknown_subagent",
                SIGNAL_SUBAGENT_REPORT,
                f"report from {parsed.reference!r}, which is not a child of this thread",
            )
        else:
            self._apply_report(parsed)

    def _apply_report(self, report: SubagentReport) -> None:
        entry = self._children[report.reference]
        if report.usage:
            entry.usage = report.usage
        if report.kind == "status":
            entry.status_note = report.status
            self._emit_child("subagent.status", entry, note=report.status)
            return
        if report.kind == "notify":
            self._emit_child("subagent.status", entry, notified=True)
            self._tell_parent(entry, report, "says")
            return
        if report.kind in ("completed", "failed"):
            entry.last_result = report.content
            entry.stop_reason = report.stop_reason
            self._set_child_status(entry, "idle" if entry.resumable else report.kind, quiet=True)
            event = "subagent.completed" if report.kind == "completed" else "subagent.failed"
            self._emit_child(event, entry, stopReason=report.stop_reason)
        else:  # closed
            entry.closed = True
            if entry.status in _LIVE:
                entry.status = "failed" if report.status == "failed" else "terminated"
            if report.content and not entry.last_result:
                entry.last_result = report.content
            self._emit_child("subagent.closed", entry)
        entry.updated_at = self._require_mem().timestamp()
        if report.reference in self._awaiting and self._awaiting[report.reference] is None:
            # A blocking call waits for this: the payload becomes its tool result.
            self._awaiting[report.reference] = report
            return
        if report.kind != "closed" and entry.parent_communication == "implicit":
            self._tell_parent(entry, report, report.kind)

    def _tell_parent(self, entry: RegistryEntry, report: SubagentReport, verb: str) -> None:
        """Queue a child's payload to this (parent) thread as a message (§8.2)."""
        if self._terminated_at:
            return
        summary = report.content or "(no message)"
        text = f"Subagent {entry.name!r} (reference {entry.reference}) {verb}: {summary}"
        self._queue_message(
            QueuedMessage(
                role="user",
                content=text[:200_000],
                attachments=list(report.attachments),
                metadata={
                    "subagent": {
                        "reference": entry.reference,
                        "name": entry.name,
                        "kind": report.kind,
                        "stopReason": report.stop_reason,
                    }
                },
            )
        )

    async def _await_report(self, reference: str) -> SubagentReport | None:
        """Wait for the child's next terminal payload; None when this thread is terminated."""
        self._awaiting[reference] = None
        await workflow.wait_condition(
            lambda: self._awaiting.get(reference) is not None or bool(self._terminated_at)
        )
        return self._awaiting.pop(reference, None)

    def _result_of(self, entry: RegistryEntry, report: SubagentReport | None) -> ToolResult:
        if report is None:
            return _error("aborted", "not finished: the thread was terminated")
        data = {
            "reference": entry.reference,
            "name": entry.name,
            "status": entry.status,
            "stopReason": report.stop_reason,
            "attachments": report.attachments,
        }
        if report.kind == "completed":
            return ToolResult(
                status="success",
                result={**data, "response": report.content},
                attachments=list(report.attachments) or None,
            )
        what = "failed" if report.kind == "failed" else "ended before answering"
        return ToolResult(
            status="error",
            error_code=ERROR_SUBAGENT_FAILED,
            error=f"subagent {entry.name!r} ({entry.reference}) {what}"
            f"{f' ({report.stop_reason})' if report.stop_reason else ''}: "
            f"{report.content or 'no details'}",
            error_data=data,
        )

    # ---- termination (Runtime §10) ---------------------------------------------------

    async def propagate_terminate(self) -> None:
        """Soft-terminate every live child and wait (bounded) for each to report `closed`,
        so the parent's final registry shows how its children ended (§10)."""
        live = [e for e in self._children.values() if not e.closed]
        reason = f"parent thread {self._require_mem().thread_id} was terminated"
        for entry in live:
            try:
                await workflow.get_external_workflow_handle(entry.reference).signal(
                    SIGNAL_TERMINATE, {"reason": reason}
                )
            except Exception as err:  # a child already gone needs nothing
                workflow.logger.info("terminate of child %s: %s", entry.reference, err)
        if not live:
            return
        try:
            await workflow.wait_condition(
                lambda: all(e.closed for e in live), timeout=CHILD_CLOSE_TIMEOUT
            )
        except TimeoutError:
            open_ = ", ".join(e.reference for e in live if not e.closed)
            self._require_mem().incident(
                "children_not_closed", f"no closed report within the timeout from: {open_}"
            )

    # ---- helpers ---------------------------------------------------------------------

    def _find_child(self, wanted: Any) -> RegistryEntry | None:
        if not isinstance(wanted, str):
            return None
        if wanted in self._children:
            return self._children[wanted]
        named = [e for e in self._children.values() if e.name == wanted]
        live = [e for e in named if not e.closed]
        candidates = live or named
        return candidates[-1] if candidates else None

    def _set_child_status(self, entry: RegistryEntry, status: Any, *, quiet: bool = False) -> None:
        entry.status = status
        entry.updated_at = self._require_mem().timestamp()
        if not quiet:
            self._emit_child("subagent.status", entry)

    def _emit_child(
        self, event: str, entry: RegistryEntry, turn_id: str | None = None, **extra: Any
    ) -> None:
        self._require_mem().emit(
            event,
            {
                "parentThreadId": self._require_mem().thread_id,
                "childThreadId": entry.reference,
                "entry": entry.model_dump(mode="json", by_alias=True),
                **extra,
            },
            turn_id=turn_id,
            tool_call_id=entry.tool_call_id,
        )

    def _env(self, side: Side) -> dict[str, EnvEntry]:
        """This thread's env as the workflow knows it: prompt, agent, then thread values."""
        agent = self._agent()
        prompt = self._require_snapshot().prompts[agent.side(side).prompt]
        return merge_env(prompt.env, agent.env, self._require_start().env)


class _MissingFile(Exception):
    """An attachment path that does not exist in the source thread."""


def _env_text(env: dict[str, EnvEntry], name: str | None) -> str | None:
    # nameEnv/descriptionEnv are model-visible hints by definition (§7.4).
    entry = env.get(name) if name else None
    return str(entry.value) if entry is not None and entry.value is not None else None


def _paths(args: dict[str, Any], prop: str | None) -> list[str] | str:
    if not prop or args.get(prop) is None:
        return []
    value = args[prop]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        return f"{prop!r} must be a list of file paths"
    return list(value)


def _started(entry: RegistryEntry) -> ToolResult:
    return ToolResult(
        status="success",
        result={
            "reference": entry.reference,
            "name": entry.name,
            "status": entry.status,
            "note": "the subagent runs on its own; its result arrives as a message",
        },
    )


def _error(code: str, message: str) -> ToolResult:
    return ToolResult(status="error", error=message, error_code=code)


def _failure_text(err: BaseException) -> str:
    parts, current = [], err
    while current is not None:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__  # type: ignore[assignment]
    return ": ".join(p for p in parts if p)[:2000]
