"""Starting subagents: child workflows, attachment copies, and the §7.5 bootstrap.

The parent close policy is ABANDON: a parent that continues as new must not take its
children with it, so `terminate` is propagated by the runtime itself (Runtime §10, see
`SubagentRegistry.propagate_terminate`). Scoped variables a child needs but the parent
lacks defer the child until `weft serve` stores them (`variables_provided`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from contract.activities import ACTIVITY_FILES_COPY, CopyFilesInput, CopyFilesResult, ToolResult
from contract.messages import QueuedMessage
from contract.subagents import (
    ACTIVITY_VARIABLES_REQUEST,
    ERROR_SUBAGENT_FAILED,
    ERROR_VARIABLES_REQUIRED,
    SIGNAL_VARIABLES_PROVIDED,
    ParentLink,
    RegistryEntry,
    SpawnRequest,
    SubagentReport,
    VariableRequest,
    VariablesProvided,
)
from contract.thread import WORKFLOW_TYPE, ThreadStartInput
from workflows.control import parse_single
from workflows.subagent_registry import MissingFile, SubagentRegistry, failure_text, tool_error

# A store that is down for longer than these attempts fails the copy, not the thread.
COPY_ATTEMPTS = 10


class SubagentSpawner(SubagentRegistry):
    """Starts child threads for the parent."""

    # ---- spawning --------------------------------------------------------------------

    async def _spawn(
        self, request: SpawnRequest, *, turn_id: str | None
    ) -> RegistryEntry | ToolResult:
        """Start a child thread for `request`; a ToolResult when it cannot start (yet)."""
        mem, snapshot = self._require_mem(), self._require_snapshot()
        config, message = request.config, request.message
        env = self._env(self._active_side or "a")
        scoped = {
            n: {"value": env[n].value, "type": "secret"}
            for n in config.required_scoped_env()
            if n in env
        }
        missing = [n for n in config.required_scoped_env() if n not in env]
        if missing and request.scoped_env_request is None:
            return await self._defer(request, missing)
        reference = mem.new_id("thread")
        try:
            copied = await self._copy_files(reference, request.attachments, f"{reference}:in")
        except MissingFile as err:
            return tool_error("attachment_not_found", str(err))
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
                tool_call_id=request.tool_call_id,
                name=request.name,
                description=request.description,
                tool=request.tool,
                resumable=resumable is not False,
                blocking=config.blocking,
                parent_communication=(
                    resumable.parent_communication if resumable is not False else "implicit"
                ),
            ),
            arguments=request.arguments,
            scoped_env_request=request.scoped_env_request,
            options=start.options,
        )
        agent = snapshot.agents.get(config.name)
        entry = RegistryEntry(
            reference=reference,
            name=request.name,
            description=request.description or (agent.description if agent else None),
            resumable=resumable is not False,
            blocking=config.blocking,
            status="starting",
            parent_communication=child.parent.parent_communication if child.parent else "implicit",
            created_at=mem.timestamp(),
            agent=config.name,
            tool=request.tool,
            tool_call_id=request.tool_call_id,
            receives_messages=receives,
            arguments=request.arguments,
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
            return tool_error(
                ERROR_SUBAGENT_FAILED, f"subagent {request.name!r} could not start: {err}"
            )
        # A resumable child started without a task waits for subagent_message.
        self._set_child_status(entry, "running" if message else "idle", quiet=True)
        self._in_background(asyncio.create_task(self._watch(entry, handle)), watcher=True)
        self._emit_child("subagent.spawned", entry, turn_id=turn_id)
        await self._publish()
        return entry

    async def _watch(self, entry: RegistryEntry, handle: Any) -> None:
        """Close the registry entry when the child workflow ends, reported or not."""
        failure: str | None = None
        try:
            await handle
        except ChildWorkflowError as err:
            failure = failure_text(err)
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
                retry_policy=RetryPolicy(maximum_attempts=COPY_ATTEMPTS),
            )
        except ActivityError as err:
            # Never fail the workflow over a copy: the caller turns this into a tool error.
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == "FileNotFound":
                raise MissingFile(cause.message) from None
            raise MissingFile(f"attachments could not be copied: {failure_text(err)}") from None
        return result.paths

    # ---- scoped variable bootstrap (Runtime §7.5) ------------------------------------

    async def _defer(self, spawn: SpawnRequest, missing: list[str]) -> ToolResult:
        mem = self._require_mem()
        config, tool_call_id = spawn.config, spawn.tool_call_id
        request = VariableRequest(
            request_id=mem.new_id("varreq"),
            parent_thread_id=mem.thread_id,
            tool_call_id=tool_call_id,
            subagent=config.name,
            name=spawn.name,
            missing=missing,
            created_at=mem.timestamp(),
        )
        await workflow.execute_local_activity(
            ACTIVITY_VARIABLES_REQUEST, request, start_to_close_timeout=timedelta(seconds=30)
        )
        self._deferred[request.request_id] = spawn.model_copy(
            update={"scoped_env_request": request.request_id}
        )
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
        deferred = self._deferred.pop(parsed.request_id, None)
        if deferred is None:
            self._warn(
                "unknown_variable_request",
                SIGNAL_VARIABLES_PROVIDED,
                f"no deferred subagent waits on request {parsed.request_id!r}",
            )
            return
        if self._refuse_when_terminated(SIGNAL_VARIABLES_PROVIDED):
            return
        self._in_background(asyncio.create_task(self._boot(deferred)))

    async def _boot(self, deferred: SpawnRequest) -> None:
        """Start a deferred subagent now that its values are stored; tell the parent."""
        mem, request_id = self._require_mem(), deferred.scoped_env_request
        spawned = await self._spawn(deferred, turn_id=None)
        mem.emit("action.resolved", {"actionId": request_id, "kind": "scoped_variables"})
        if isinstance(spawned, ToolResult):
            text = f"The deferred subagent {deferred.name!r} could not start: {spawned.error}"
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
