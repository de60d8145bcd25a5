"""Who did each control action through the Python client or the CLI, in the store's audit
log beside the HTTP API's (docs/tenants.md#audit).

An `AuditTrail` is built by a caller that knows who it acts for: `weft.Thread` (subject
`python`) and the CLI (`cli:<os user>`). `Threads` given none records nothing: the HTTP
API hands its handlers one without a trail, since its middleware records each request
itself (api/auth.py); so every action is recorded once, by whoever received it.

An entry is written once the action's outcome is known, in the HTTP API's words: the route
the same action has over HTTP (or would have: keys, quotas, retention and schedules have
none), and a status: 200 done (202 when it was accepted but its end not waited for), a
refusal's status otherwise (404 an unknown or closed thread, task, job or schedule, 409 the
thread refused it or a task's or job's state forbids it, 422 bad input, 429 a quota, 503
Temporal did not answer). A refused action is recorded as refused, never as done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from weft.client.ask import TurnWaitTimeout
from weft.client.schedule_inputs import ScheduleNotFound
from weft.client.thread_tenant import thread_tenant
from weft.contract.jobs import JobError, JobNotFound, JobThreadNotFound
from weft.contract.tasks import TaskError, TaskNotFound
from weft.store import Store
from weft.store.audit import AuditEntry
from weft.store.bundle_rows import ThreadExists
from weft.store.tenant_quotas import QuotaExceeded

log = logging.getLogger(__name__)

PYTHON_SUBJECT = "python"  # the Python client (`weft.Thread`)
CLI_SUBJECT = "cli"  # the `weft` command, as `cli:<os user>`
SUBJECT_LENGTH = 64  # the audit log's subject column


@dataclass(frozen=True)
class ControlAction:
    """What was done, as the HTTP API names it: a method and a route template whose
    `{…}` parameters the entry's path fills in."""

    method: str
    route: str
    done: int = 200  # the status of the action done
    # The status of a refusal that names no field (a task's or job's state forbids the
    # command: 409, as over HTTP); a refused input is 422 whatever this says.
    refused: int = 422


START = ControlAction("POST", "/threads", done=201)
SEND = ControlAction("POST", "/threads/{thread_id}/messages", done=202)
SUBMIT_TURN = ControlAction("POST", "/threads/{thread_id}/turns", done=202)
ASK = ControlAction("POST", "/threads/{thread_id}/turns")
QUEUE_TOOL = ControlAction("POST", "/threads/{thread_id}/tools/queue", done=202)
RESPOND = ControlAction("POST", "/threads/{thread_id}/actions/{action_id}")
TERMINATE = ControlAction("POST", "/threads/{thread_id}/terminate", done=202)
INTERRUPT = ControlAction("POST", "/threads/{thread_id}/interrupt")
UPGRADE = ControlAction("POST", "/threads/{thread_id}/upgrade")
BUDGET = ControlAction("POST", "/threads/{thread_id}/budget")
COMPACT = ControlAction("POST", "/threads/{thread_id}/compact", done=202)
REFRESH_TOOLS = ControlAction("POST", "/threads/{thread_id}/tools/refresh", done=202)
SCHEDULE_EFFECT = ControlAction("POST", "/threads/{thread_id}/effects")
REMOVE_EFFECT = ControlAction("DELETE", "/threads/{thread_id}/effects/{effect_id}")
IMPORT = ControlAction("POST", "/threads/import", done=201)
FORK = ControlAction("POST", "/threads/{thread_id}/fork", done=201)
REWIND = ControlAction("POST", "/threads/{thread_id}/rewind", done=201)
KEY_CREATE = ControlAction("POST", "/keys/{key_id}", done=201)
KEY_REVOKE = ControlAction("POST", "/keys/{key_id}/revoke")
QUOTA_SET = ControlAction("PUT", "/tenants/{tenant}/quota")
QUOTA_CLEAR = ControlAction("DELETE", "/tenants/{tenant}/quota")
RETENTION_SET = ControlAction("PUT", "/tenants/{tenant}/retention")
RETENTION_CLEAR = ControlAction("DELETE", "/tenants/{tenant}/retention")
# Tasks and jobs: their HTTP routes (api/task_routes.py, job_routes.py).
TASK_CREATE = ControlAction("POST", "/tasks", done=201)
TASK_COMMANDS = {
    name: ControlAction("POST", f"/tasks/{{task_id}}/{name}", done=202, refused=409)
    for name in (
        "cancel",
        "retry",
        "start",
        "update",
        "delegate",
        "link",
        "unlink",
        "pause",
        "resume",
        "complete",
        "fail",
        "progress",
    )
}
JOB_CREATE = ControlAction("POST", "/jobs", done=201)
JOB_CANCEL = ControlAction("POST", "/jobs/{job_id}/cancel", done=202, refused=409)
JOB_RESUME = ControlAction("POST", "/jobs/{job_id}/resume", done=202, refused=409)
# Schedules have no HTTP routes: these are their like, as keys' are.
SCHEDULE_CREATE = ControlAction("POST", "/schedules/{name}", done=201)
SCHEDULE_PAUSE = ControlAction("POST", "/schedules/{name}/pause")
SCHEDULE_UNPAUSE = ControlAction("POST", "/schedules/{name}/unpause")
SCHEDULE_TRIGGER = ControlAction("POST", "/schedules/{name}/trigger", done=202)
SCHEDULE_DELETE = ControlAction("DELETE", "/schedules/{name}")


class Outcome:
    """How an action ended: its status, which the action sets when its result says more
    than done (a turn the thread refused is a 409, as over HTTP), the thread it made when
    it started one, and the tenant it acted on when only the action learnt it (a job made
    for a thread is the thread's tenant's; a schedule is read before it is paused); and
    route parameters the action learnt better than it was asked (a tenant's schedule
    created as `x` is named `acme:x`)."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.thread_id: str | None = None
        self.tenant: str | None = None
        self.params: dict[str, str] = {}


def refusal_status(err: Exception, *, refused: int = 422) -> int:
    """The HTTP API's status for an action that raised `err`; `refused`: the status of a
    refusal naming no field (`ControlAction.refused`)."""
    if isinstance(err, TaskNotFound | JobNotFound | JobThreadNotFound | ScheduleNotFound):
        return 404
    if isinstance(err, TaskError):
        return 422 if err.field is not None else refused
    if isinstance(err, JobError):
        return refused
    if isinstance(err, TurnWaitTimeout):
        return 202  # the message was accepted; its turn goes on, not waited for
    if isinstance(err, RPCError):
        return 404 if err.status == RPCStatusCode.NOT_FOUND else 503
    if isinstance(err, WorkflowUpdateFailedError | WorkflowAlreadyStartedError | ThreadExists):
        return 409
    if isinstance(err, QuotaExceeded):
        return 429
    if isinstance(err, ValidationError | ValueError | TypeError):
        return 422
    return 500


class AuditTrail:
    """Records the control actions of one actor (`subject`) in `store`'s audit log, each
    with the tenant it acted on: the one named, or the tenant of the thread acted on (from
    the store, else from Temporal through `client`)."""

    def __init__(self, store: Store, subject: str, *, client: Client | None = None) -> None:
        if not subject or len(subject) > SUBJECT_LENGTH:
            raise ValueError(f"audit subject {subject!r}: 1 to {SUBJECT_LENGTH} characters")
        self._client = client
        self._store = store
        self.subject = subject

    @asynccontextmanager
    async def acting(
        self,
        action: ControlAction,
        *,
        thread_id: str | None = None,
        tenant: str | None = None,
        **params: str,
    ) -> AsyncIterator[Outcome]:
        """Run the body as `action` and record how it ended: the outcome it set (default:
        done), or the refusal it raised (re-raised). A body cancelled is not recorded:
        whether it was done is not known."""
        outcome = Outcome(action.done)

        async def record(status: int) -> None:
            # What the body learnt (its thread, tenant, parameters) wins over what was asked.
            await self.record(
                action,
                status,
                thread_id=outcome.thread_id or thread_id,
                tenant=outcome.tenant or tenant,
                **(params | outcome.params),
            )

        try:
            yield outcome
        except Exception as err:
            await record(refusal_status(err, refused=action.refused))
            raise
        await record(outcome.status)

    async def record(
        self,
        action: ControlAction,
        status: int,
        *,
        thread_id: str | None = None,
        tenant: str | None = None,
        **params: str,
    ) -> None:
        """Write one entry; `tenant` None is the thread's (None for an unknown thread)."""
        try:
            if tenant is None and thread_id is not None:
                tenant = await thread_tenant(self._client, self._store, thread_id)
            path = action.route.format(thread_id=thread_id, tenant=tenant, **params)
            entry = AuditEntry(
                at=datetime.now(UTC),
                subject=self.subject,
                tenant=tenant,
                method=action.method,
                route=action.route,
                path=path,
                thread_id=thread_id,
                status=status,
            )
            await asyncio.to_thread(self._store.audit.record, entry)
        except Exception:
            # The action is done (or refused for its own reason): a lost record must not
            # turn its outcome into another error, as over HTTP.
            log.exception("could not record %s %s by %s", action.method, action.route, self.subject)


__all__ = [
    "ASK",
    "BUDGET",
    "CLI_SUBJECT",
    "COMPACT",
    "FORK",
    "IMPORT",
    "INTERRUPT",
    "JOB_CANCEL",
    "JOB_CREATE",
    "JOB_RESUME",
    "KEY_CREATE",
    "KEY_REVOKE",
    "PYTHON_SUBJECT",
    "QUEUE_TOOL",
    "QUOTA_CLEAR",
    "QUOTA_SET",
    "REFRESH_TOOLS",
    "REMOVE_EFFECT",
    "RESPOND",
    "RETENTION_CLEAR",
    "RETENTION_SET",
    "REWIND",
    "SCHEDULE_CREATE",
    "SCHEDULE_DELETE",
    "SCHEDULE_EFFECT",
    "SCHEDULE_PAUSE",
    "SCHEDULE_TRIGGER",
    "SCHEDULE_UNPAUSE",
    "SEND",
    "START",
    "SUBMIT_TURN",
    "TASK_COMMANDS",
    "TASK_CREATE",
    "TERMINATE",
    "UPGRADE",
    "AuditTrail",
    "ControlAction",
    "Outcome",
    "refusal_status",
]
