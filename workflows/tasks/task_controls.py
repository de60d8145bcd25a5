"""The commands a task takes while it runs, and their checks (docs/tasks.md).

Each command is an update, refused before history when the task's state forbids it
(`TASK_REFUSED`, naming the field): `start` (a task created with `autoStart: false`),
`update`, `delegate`, `link` / `unlink` (before its attempts start), `pause` / `resume`
(no new attempt while paused; a running one runs to its end), `complete` / `fail` (an
operator's outcome). `cancel_task` and progress are signals. `TaskControls` owns what the
commands asked for; the attempt loop, the dependency wait and the run read it.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol, TypeVar

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from weft.contract.tasks import (
    ACTIVITY_TASK_LINK,
    TASK_REFUSED,
    CancelTask,
    CompleteTask,
    DelegateTask,
    LinkResult,
    LinkTasks,
    TaskChanges,
    TaskCommand,
    TaskEventsInput,
    TaskProgress,
)
from weft.contract.validation import describe_validation_error
from weft.contract.wire import CamelModel
from weft.workflows.tasks.task_log import LOCAL_TIMEOUT, TaskLog, now_iso
from weft.workflows.tasks.task_views import RunFacts

_M = TypeVar("_M", bound=CamelModel)


class ControlHost(RunFacts, Protocol):
    """What the commands read of the run: its log, and whether the attempts have begun
    (the attempt loop's fact, read through the workflow that composes both)."""

    @property
    def attempts_started(self) -> bool: ...


class TaskControls:
    """The commands' handlers and checks, and what they asked for."""

    def __init__(self, run: ControlHost) -> None:
        self._run = run
        self.cancel: CancelTask | None = None
        self.start: TaskCommand | None = None  # `start` of a task created not to start
        self.paused_from: str | None = None  # the status before `pause`; None: not paused
        self.verdict: tuple[str, CompleteTask | TaskCommand] | None = None
        self.deadline_moves = 0
        self.wakes = 0  # resumes and edge changes: the dependency wait looks again

    # ---- signals --------------------------------------------------------------------

    def on_cancel(self, raw: Any) -> None:
        try:
            self.cancel = CancelTask.model_validate(raw or {})
        except ValidationError:
            self.cancel = CancelTask(reason="cancelled (the request's reason was malformed)")

    async def append_progress(self, raw: Any) -> None:
        try:
            entry = TaskProgress.model_validate(raw)
        except ValidationError as err:
            workflow.logger.warning("progress refused: %s", describe_validation_error(err))
            return
        if self._run.log is None:
            # A signal of the run's first activation is handled before `run` has read its
            # input: one sent while the run continued as new lands there. Kept once the
            # run has begun; runs from before continue-as-new dropped it (and replay so).
            await self._ready()
            if not self._run.continues:
                return
        log = self._run.log
        if log is None or log.record.terminal:
            return
        entry = entry.model_copy(update={"at": entry.at or now_iso()})
        await log.emit("task.progress", {"progress": entry.model_dump(mode="json")})

    # ---- updates and their validators -----------------------------------------------

    async def start_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        self.check_start(raw)  # the validator may have run before the run began
        self.start = _parse(TaskCommand, raw)
        return self._open().record.model_dump(mode="json")

    def check_start(self, raw: Any) -> None:
        _parse(TaskCommand, raw)
        if self._run.log is None:
            return  # the run has not begun: the handler waits for it and checks
        log = self._open()
        if log.record.auto_start or self.start is not None:
            _refuse(f"task {log.record.task_id} was started already")

    async def update_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        changes = _parse(TaskChanges, raw)
        log = self._open()
        async with log.turn():
            self._before_attempts("changed")
            await log.write_in_turn(
                log.event("task.updated", {"changes": changes.changes(), **_who(changes)})
            )
        if changes.constraints is not None:
            self.deadline_moves += 1
        return log.record.model_dump(mode="json")

    def check_update(self, raw: Any) -> None:
        if not _parse(TaskChanges, raw).changes():
            _refuse("nothing to change: give objective, constraints or acceptance", "body")
        if self._run.log is not None:
            self._before_attempts("changed")

    async def delegate_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        command = _parse(DelegateTask, raw)
        log = self._open()
        async with log.turn():
            self._before_attempts("delegated")
            payload = {"to": command.to, "from": log.record.assignee, **_who(command)}
            await log.write_in_turn(log.event("task.delegated", payload))
        return log.record.model_dump(mode="json")

    def check_delegate(self, raw: Any) -> None:
        self._check_before_attempts(DelegateTask, raw, "delegated")

    async def link_tasks(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        return await self._change_edge(_parse(LinkTasks, raw), "added")

    def check_link(self, raw: Any) -> None:
        self._check_before_attempts(LinkTasks, raw, "linked to a dependency")

    async def unlink_tasks(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        return await self._change_edge(_parse(LinkTasks, raw), "removed")

    def check_unlink(self, raw: Any) -> None:
        self._check_before_attempts(LinkTasks, raw, "unlinked from a dependency")

    async def pause_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        self.check_pause(raw)  # the validator may have run before the run began
        command = _parse(TaskCommand, raw)
        log = self._open()
        async with log.turn():
            self.check_pause(raw)  # again in turn: the task may have ended meanwhile
            self.paused_from = log.record.status
            await log.write_in_turn(log.event("task.paused", _who(command)))
        return log.record.model_dump(mode="json")

    def check_pause(self, raw: Any) -> None:
        _parse(TaskCommand, raw)
        if self._run.log is None:
            return  # the run has not begun: the handler waits for it and checks
        log = self._open()
        if self.paused_from is not None:
            _refuse(f"task {log.record.task_id} is paused already")

    async def resume_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        self.check_resume(raw)  # the validator may have run before the run began
        command = _parse(TaskCommand, raw)
        log = self._open()
        async with log.turn():
            self.check_resume(raw)  # again in turn: the task may have ended meanwhile
            status = self._resumed_status(log)
            await log.write_in_turn(log.event("task.resumed", {"status": status, **_who(command)}))
            self.paused_from = None  # after the event: no attempt is recorded before it
        self.wakes += 1
        return log.record.model_dump(mode="json")

    def check_resume(self, raw: Any) -> None:
        _parse(TaskCommand, raw)
        if self._run.log is None:
            return  # the run has not begun: the handler waits for it and checks
        log = self._open()
        if self.paused_from is None:
            _refuse(f"task {log.record.task_id} is {log.record.status}, not paused")

    async def complete_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        return await self._conclude("completed", _parse(CompleteTask, raw))

    def check_complete(self, raw: Any) -> None:
        self._check_open(CompleteTask, raw)

    async def fail_task(self, raw: Any) -> dict[str, Any]:
        await self._ready()
        return await self._conclude("failed", _parse(TaskCommand, raw))

    def check_fail(self, raw: Any) -> None:
        self._check_open(TaskCommand, raw)

    # ---- what the attempt loop and the dependency wait ask -------------------------

    async def gate(self) -> None:
        """Wait while the task is paused: no new attempt starts (a rest: the run may
        continue as new from it)."""
        await self._run.rest(lambda: self.paused_from is None)

    def restore(self, start: TaskCommand | None, paused_from: str | None) -> None:
        """What a run that continued as new had been asked: the start of a held task,
        and the pause."""
        self.start, self.paused_from = start, paused_from

    # ---- checks ---------------------------------------------------------------------

    def _check_open(self, model: type[CamelModel], raw: Any) -> None:
        """A command's payload, and, once the run has begun, a task that can still change."""
        _parse(model, raw)
        if self._run.log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._open()

    def _check_before_attempts(self, model: type[CamelModel], raw: Any, verb: str) -> None:
        """A command's payload, and, once the run has begun, attempts not yet begun."""
        _parse(model, raw)
        if self._run.log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._before_attempts(verb)

    async def _ready(self) -> None:
        """Wait for the run to begin: a command can arrive with the run's first activation,
        before `run` has read its input (its validator let it through unchecked)."""
        await workflow.wait_condition(lambda: self._run.log is not None)

    def _open(self) -> TaskLog:
        """The task's log while the task can still change; refused once it is ending."""
        log = self._run.log
        if log is None:
            _refuse("the task's run has not begun yet; try again")
        ending = self.cancel is not None or self.verdict is not None
        if log.record.terminal or ending:
            _refuse(f"task {log.record.task_id} is {'ending' if ending else log.record.status}")
        return log

    def _before_attempts(self, verb: str) -> None:
        """Refused once the task's attempts have started in this run."""
        log = self._open()
        if self._run.attempts_started:
            _refuse(
                f"task {log.record.task_id} is {log.record.status}: a task is {verb} only "
                "before its attempts start"
            )

    # ---- what the commands do -------------------------------------------------------

    async def _change_edge(self, command: LinkTasks, change: str) -> dict[str, Any]:
        """Add or remove a dependency edge: checked against the whole graph and stored in
        one store transaction (`task.link`), so no two links can close a cycle."""
        log = self._open()
        payload = {"dependsOn": command.depends_on, "change": change, **_who(command)}
        async with log.turn():
            self._before_attempts("linked or unlinked")
            [event] = log.stated(log.event("task.dependency.updated", payload))
            result = await workflow.execute_local_activity(
                ACTIVITY_TASK_LINK,
                TaskEventsInput(events=[event]),
                result_type=LinkResult,
                start_to_close_timeout=LOCAL_TIMEOUT,
            )
            if result.refused is not None:
                _refuse(result.refused, result.field)
            log.fold(event)
        self.wakes += 1
        return log.record.model_dump(mode="json")

    async def _conclude(self, status: str, command: CompleteTask | TaskCommand) -> dict[str, Any]:
        """An operator's outcome: the run ends with it, and the update answers once the
        task has ended (with it, or with the outcome that was already being written)."""
        log = self._open()
        self.verdict = (status, command)
        await workflow.wait_condition(lambda: log.record.terminal)
        return log.record.model_dump(mode="json")

    def _resumed_status(self, log: TaskLog) -> str:
        """The status a resumed task returns to: running with its attempt, retrying once
        its attempts began, else where it waited (accepted, queued, blocked)."""
        attempt = log.record.current_attempt()
        if attempt is not None and attempt.status == "running":
            return "running"
        if self._run.attempts_started:
            return "retrying"
        return self.paused_from or "queued"


def _parse(model: type[_M], raw: Any) -> _M:
    """A command's payload; refused naming the field that is wrong."""
    try:
        return model.model_validate(raw or {})
    except ValidationError as err:
        field = ".".join(str(p) for p in err.errors()[0]["loc"]) or "body"
        _refuse(f"invalid command: {describe_validation_error(err)}", field)


def _refuse(message: str, field: str | None = None) -> NoReturn:
    """Refuse a command: the client raises TaskError(message, field=field)."""
    raise ApplicationError(message, field, type=TASK_REFUSED, non_retryable=True)


def _who(command: TaskCommand) -> dict[str, Any]:
    """Who asked and why, for the event's payload (only what was given)."""
    return command.model_dump(mode="json", include={"by", "reason"}, exclude_none=True)
