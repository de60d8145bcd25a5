"""Starting subagents: child workflows, attachment copies, and the §7.5 bootstrap.

The parent close policy is ABANDON: a parent that continues as new must not take its
children with it, so `terminate` is propagated by the runtime itself (Runtime §10, see
`SubagentRegistry.propagate_terminate`). Scoped variables a child needs but the parent
lacks defer the child until `weft serve` stores them (`variables_provided`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

from weft.contract.activities import ToolResult
from weft.contract.carry_parts import SubagentBook
from weft.contract.messages import QueuedMessage, Side
from weft.contract.subagents import (
    ACTIVITY_VARIABLES_REQUEST,
    ERROR_SUBAGENT_FAILED,
    ERROR_VARIABLES_REQUIRED,
    ParentLink,
    RegistryEntry,
    SpawnRequest,
    SubagentReport,
    VariableRequest,
    VariablesProvided,
)
from weft.contract.thread import WORKFLOW_TYPE, ThreadStartInput
from weft.contract.ui_text import secret_values, thread_summary
from weft.workflows import search_attributes, ui_summaries
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.background import BackgroundTasks
from weft.workflows.failures import failure_text
from weft.workflows.queue import ThreadQueue
from weft.workflows.subagents.common import ToolRefused, refuse
from weft.workflows.subagents.files import MissingFile, copy_files
from weft.workflows.subagents.registry import SubagentRegistry
from weft.workflows.views import Facts, Identity

# A child thread's id is `<agent>-<12 hex>`, as every other generated thread id is; runs
# recorded before this patch named theirs `thread_<32 hex>`, and replay that. Asked once,
# in the run's first activation (agent_thread.py), not where a child starts: a patch asked
# mid-run can land in another workflow task on replay (tests/test_patch_placement.py).
CHILD_ID_PATCH = "subagent-thread-ids-v1"


class UnknownVariableRequest(Exception):
    """`variables_provided` named a request no deferred subagent waits on."""


class SpawnerView(Facts, Identity, Protocol):
    """What starting subagents reads of the thread, and the subagent book it changes."""

    @property
    def active_side(self) -> Side | None: ...

    @property
    def subagents(self) -> SubagentBook: ...

    @property
    def readable_child_ids(self) -> bool: ...

    def new_thread_id(self, agent: str) -> str: ...


class SubagentSpawner:
    """Starts child threads for the parent."""

    def __init__(
        self,
        mem: SpawnerView,
        agents: ActiveAgent,
        registry: SubagentRegistry,
        queue: ThreadQueue,
        background: BackgroundTasks,
    ) -> None:
        self._mem = mem
        self._agents = agents
        self._registry = registry
        self._queue = queue
        self._background = background

    async def spawn(self, request: SpawnRequest, *, turn_id: str | None) -> RegistryEntry:
        """Start a child thread for `request`; `ToolRefused` when it cannot start (yet)."""
        mem, snapshot = self._mem, self._agents.snapshot()
        config, message = request.config, request.message
        env = self._agents.env(mem.active_side or "a")
        scoped = {
            n: {"value": env[n].value, "type": "secret"}
            for n in config.required_scoped_env()
            if n in env
        }
        missing = [n for n in config.required_scoped_env() if n not in env]
        if missing and request.scoped_env_request is None:
            raise ToolRefused(await self._defer(request, missing))
        reference = (
            mem.new_thread_id(config.name) if mem.readable_child_ids else mem.new_id("thread")
        )
        try:
            copied = await copy_files(
                mem.thread_id, reference, request.attachments, f"{reference}:in"
            )
        except MissingFile as err:
            raise refuse("attachment_not_found", str(err)) from None
        resumable = config.resumable
        receives = resumable.receives_messages if resumable is not False else "side_a"
        role = "assistant" if receives == "side_b" else "user"
        start = mem.start
        child = ThreadStartInput(
            agent=config.name,
            messages=[QueuedMessage(role=role, content=message, attachments=copied)]
            if message
            else [],
            env=scoped,
            session_id=mem.session_id,  # the tree is one session
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
                snapshot_id=snapshot.snapshot_id,
                hooks=self._agents.hook_ids(mem.active_side or "a", "after_subagent_created"),
            ),
            arguments=request.arguments,
            scoped_env_request=request.scoped_env_request,
            options=start.options,
            # The child spends from its parent's tree: a parent's budget bounds all of it.
            budget_root=start.budget_root or mem.thread_id,
            tenant=start.tenant,  # a tree belongs to one tenant
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
        self._registry.add(entry)
        try:
            handle = await workflow.start_child_workflow(
                WORKFLOW_TYPE,
                child.model_dump(mode="json", by_alias=True, exclude_none=True),
                id=reference,
                task_queue=workflow.info().task_queue,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                search_attributes=search_attributes.start_attributes(start.tenant),
                static_summary=thread_summary(
                    f"{config.name} · subagent {request.name}", child.messages, secret_values(env)
                ),
            )
        except Exception as err:  # any start failure becomes a tool error
            self._registry.drop(reference)
            raise refuse(
                ERROR_SUBAGENT_FAILED, f"subagent {request.name!r} could not start: {err}"
            ) from None
        # A resumable child started without a task waits for subagent_message.
        self._registry.set_status(entry, "running" if message else "idle", quiet=True)
        self._background.watch(self._watch(entry, handle))
        self._registry.emit(entry, "subagent.spawned", turn_id=turn_id)
        await self._registry.publish()
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
        self._registry.apply(report)

    # ---- scoped variable bootstrap (Runtime §7.5) ------------------------------------

    async def _defer(self, spawn: SpawnRequest, missing: list[str]) -> ToolResult:
        mem = self._mem
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
            ACTIVITY_VARIABLES_REQUEST,
            request,
            start_to_close_timeout=timedelta(seconds=30),
            summary=ui_summaries.variables_request(spawn.name, missing),
        )
        mem.subagents.deferred[request.request_id] = spawn.model_copy(
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

    def take_deferred(self, provided: VariablesProvided) -> SpawnRequest:
        """The deferred spawn `provided` unblocks; `UnknownVariableRequest` if none waits."""
        deferred = self._mem.subagents.deferred.pop(provided.request_id, None)
        if deferred is None:
            raise UnknownVariableRequest(
                f"no deferred subagent waits on request {provided.request_id!r}"
            )
        return deferred

    def boot_later(self, deferred: SpawnRequest) -> None:
        """Start a deferred subagent in the background (from a signal handler)."""
        self._background.run(self._boot(deferred))

    async def _boot(self, deferred: SpawnRequest) -> None:
        """Start a deferred subagent now that its values are stored; tell the parent."""
        mem, request_id = self._mem, deferred.scoped_env_request
        try:
            spawned = await self.spawn(deferred, turn_id=None)
        except ToolRefused as refused:
            text = (
                f"The deferred subagent {deferred.name!r} could not start: {refused.result.error}"
            )
        else:
            text = (
                f"Subagent {spawned.name!r} (reference {spawned.reference}) started after its "
                "scoped variables were provided."
            )
        mem.emit("action.resolved", {"actionId": request_id, "kind": "scoped_variables"})
        if not mem.is_terminated():
            self._queue.add_message(
                QueuedMessage(
                    role="user",
                    content=text,
                    metadata={"subagent": {"requestId": request_id, "kind": "bootstrap"}},
                )
            )
