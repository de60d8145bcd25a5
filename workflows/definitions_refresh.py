"""Definitions versions: a thread takes newer definitions only between turns, and says so.

At each new session of turns a `latest` thread asks its worker whether it serves a newer
version of the thread's agent; a `pinned` thread asks only once `upgrade_definitions` was
called. A move is recorded as `policy.changed` with both digests and what changed; the
snapshot the thread then carries is in the store, so any worker runs its turns with it.

Who asks: the session's first `model.call`, first thing, before it writes or sends
anything (`model_step.py`), so the common answer, "the same", costs no boundary of its
own. A newer version fails that call unsent; the thread then moves and calls again with
it, and the move's facts take the place they would have had at the boundary (before the
session's first events, which the failed call did not write). When something else would
run first (a queued tool, a compaction, an MCP listing), or for an upgrade, the
`definitions.refresh` local activity asks instead, as runs recorded before
`DEFINITIONS_CHECK_PATCH` always do.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import (
    ACTIVITY_DEFINITIONS_REFRESH,
    DEFINITIONS_CHANGED,
    POLICY_CHANGED,
    UPDATE_UPGRADE_DEFINITIONS,
    DefinitionsRefreshInput,
    DefinitionsRefreshResult,
    UpgradeResult,
)
from weft.contract.events import Event
from weft.contract.thread import QueueEntry
from weft.workflows import search_attributes
from weft.workflows.failures import failure_text
from weft.workflows.read_facts import DefinitionFacts, definition_facts
from weft.workflows.views import Facts, Identity

# Asked once per run, at its start, as `TRUTHFUL_LOG_PATCH` is: runs recorded before it
# neither refresh nor upsert the digest's search attribute, so they replay as they ran.
DEFINITIONS_VERSION_PATCH = "definitions-version-v1"
# Asked with it: runs recorded before it ask by the local activity at every session.
DEFINITIONS_CHECK_PATCH = "definitions-check-in-model-call-v1"


class VersionView(Facts, Identity, DefinitionFacts, Protocol):
    """The definitions a thread runs with, their digest, and a pending upgrade (carried)."""

    definitions_upgrade: bool

    @property
    def queue(self) -> deque[QueueEntry]: ...

    @property
    def outbox(self) -> list[Event]: ...

    def use_definitions(self, snapshot: DefinitionSnapshot) -> None: ...

    def is_idle(self) -> bool: ...


@dataclass
class SessionCheck:
    """A check left to the session's first model call: its turn, and where the session's
    events begin in the outbox (the move's facts go there)."""

    turn_id: str
    mark: int


class DefinitionsRefresh:
    """Moves the thread to newer definitions at turn boundaries, as its agent's policy says."""

    def __init__(self, mem: VersionView) -> None:
        self._mem = mem
        self.in_use = False
        self.folded = False
        self._upgraded: UpgradeResult | None = None
        self._session: SessionCheck | None = None
        self._asked: SessionCheck | None = None  # the check a model call carries now

    def start_run(self) -> None:
        """Ask the patches (first, with the run's others), and state the digest of a thread
        that continued from a run that did not record it."""
        self.in_use = workflow.patched(DEFINITIONS_VERSION_PATCH)
        self.folded = self.in_use and workflow.patched(DEFINITIONS_CHECK_PATCH)
        digest = self._mem.definitions_digest
        recorded = workflow.info().typed_search_attributes.get(search_attributes.DEFINITIONS_DIGEST)
        if self.in_use and digest is not None and recorded != digest:
            search_attributes.upsert_definitions_digest(digest)

    def started(self) -> None:
        """A new thread took its snapshot: record its version."""
        if self.in_use and self._mem.definitions_digest is not None:
            search_attributes.upsert_definitions_digest(self._mem.definitions_digest)

    def upgrade_waiting(self) -> bool:
        """An upgrade was asked while idle: the idle loop should do it now."""
        return self._mem.definitions_upgrade and self._mem.is_idle()

    async def at_turn_boundary(self) -> None:
        """Before a new session's first turn (or while idle, for an upgrade): take this
        worker's definitions when the policy allows and they differ."""
        mem = self._mem
        snapshot = mem.snapshot
        if not self.in_use or snapshot is None:
            return
        upgrade = mem.definitions_upgrade
        if snapshot.agent.definitions_policy == "pinned" and not upgrade:
            return
        self._session = self._asked = None
        if self.folded and not upgrade and mem.queue and not _tools_queued(mem.queue):
            # The session's first model call asks (model_step.py): nothing of the session
            # is written before it, so a move's facts can still go first.
            self._session = SessionCheck(turn_id=mem.queue[0].turn_id, mark=len(mem.outbox))
            return
        outcome = await self._refresh(snapshot, "upgrade" if upgrade else "latest")
        mem.definitions_upgrade = False
        if upgrade:
            self._upgraded = outcome

    def register(self, *, refuse_if_not_started: Callable[[], None]) -> None:
        """Set the `upgrade_definitions` update (checked: a refusal records nothing)."""

        def validate(payload: Any = None) -> None:
            refuse_if_not_started()
            self.validate_upgrade()

        workflow.set_update_handler(UPDATE_UPGRADE_DEFINITIONS, self.upgrade, validator=validate)

    def validate_upgrade(self) -> None:
        """Refuse an upgrade the thread cannot do (an update validator: nothing is recorded)."""
        mem = self._mem
        if not self.in_use:
            raise ApplicationError(
                "this thread's run started before definitions versions; it can be upgraded "
                "once it continues as new",
                type="UpgradeUnsupported",
            )
        if mem.snapshot is None:
            raise ApplicationError("the thread is still preparing", type="UpgradeRefused")
        if mem.is_terminated():
            raise ApplicationError("the thread is terminated", type="UpgradeRefused")

    async def upgrade(self, payload: Any = None) -> UpgradeResult:
        """Move the thread to its worker's definitions: now when idle, else when the
        running turn ends (`pending`)."""
        mem = self._mem
        mem.definitions_upgrade = True
        if not mem.is_idle():
            # Not waited for: a continue-as-new mid-turn waits for handlers to finish.
            return UpgradeResult(status="pending", previous_digest=mem.definitions_digest)
        await workflow.wait_condition(
            lambda: not mem.definitions_upgrade or mem.is_terminated() or not mem.is_idle()
        )
        if mem.definitions_upgrade or self._upgraded is None:  # a turn or terminate came first
            return UpgradeResult(status="pending", previous_digest=mem.definitions_digest)
        return self._upgraded

    # ---- the session's check, asked by its first model call (model_step.py) -----------

    async def first_call_check(
        self, turn_id: str, *, other_first: bool
    ) -> tuple[DefinitionsRefreshInput | None, bool]:
        """The check the model call of turn `turn_id` is to carry, if it is the session's
        first and the session left one; and whether the local activity asked instead (an
        await: the definitions may have moved meanwhile). It asks when another activity
        runs first (`other_first`: a compaction, an MCP listing) or the session's events
        were written already: a move then still precedes what depends on it."""
        pending = self._session
        if pending is None or pending.turn_id != turn_id:
            return None, False
        self._session = None
        started = _turn_started(self._mem.outbox, pending.turn_id)
        if other_first or started is None or started < pending.mark:
            await self.check_now(pending)
            return None, True
        snapshot = self._mem.snapshot
        check = None if snapshot is None else self._input(snapshot)
        if check is not None:
            self._asked = pending
        return check, False

    async def check_now(self, pending: SessionCheck) -> None:
        """Something other than the model call comes first: ask by the local activity, and
        put a move's facts where the session's events begin if they are still unwritten."""
        self._session = None
        snapshot = self._mem.snapshot
        if snapshot is not None:
            with self._placed_at(pending):
                await self._refresh(snapshot, "latest")

    def answered(self, err: ActivityError) -> bool:
        """Whether the model call carrying the check failed because the worker's
        definitions differ (or it cannot serve the agent): then the thread moves (or warns),
        its facts placed where the session's events begin, and the call is to be made again."""
        pending, self._asked = self._asked, None
        cause = err.cause
        if pending is None or not (
            isinstance(cause, ApplicationError) and cause.type == DEFINITIONS_CHANGED
        ):
            return False
        result = DefinitionsRefreshResult.model_validate(cause.details[0])
        with self._placed_at(pending):
            self._take(result, "latest")
        return True

    @contextmanager
    def _placed_at(self, pending: SessionCheck) -> Iterator[None]:
        """The events emitted inside go where the session's began, ahead of its turn's
        `turn.started`, whose definition facts are then those of the definitions in force:
        where a refresh at the boundary would have put them. When the session's events
        were written meanwhile, they stay where they were emitted."""
        outbox = self._mem.outbox
        before = len(outbox)
        yield
        started = _turn_started(outbox, pending.turn_id)
        if started is None or not before > started >= pending.mark:
            return
        ours = outbox[before:]
        del outbox[before:]
        if not ours:
            return
        at = outbox[pending.mark].timestamp  # the session's start: the boundary
        outbox[pending.mark : pending.mark] = [e.model_copy(update={"timestamp": at}) for e in ours]
        index = started + len(ours)
        turn = outbox[index]
        payload = {**(turn.payload or {}), **definition_facts(self._mem)}
        outbox[index] = turn.model_copy(update={"payload": payload})

    async def _refresh(self, snapshot: DefinitionSnapshot, reason: str) -> UpgradeResult:
        mem = self._mem
        previous = mem.definitions_digest
        unchanged = UpgradeResult(status="unchanged", previous_digest=previous, digest=previous)
        if previous is None:
            return unchanged
        try:
            result: DefinitionsRefreshResult = await workflow.execute_local_activity(
                ACTIVITY_DEFINITIONS_REFRESH,
                self._input(snapshot),
                result_type=DefinitionsRefreshResult,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=5),
                summary="definitions refresh",
            )
        except ActivityError as err:
            # The thread keeps the definitions it has: a refresh is never worth a stuck turn.
            self._warn("definitions_refresh_failed", failure_text(err))
            return unchanged
        return self._take(result, reason)

    def _take(self, result: DefinitionsRefreshResult, reason: str) -> UpgradeResult:
        """Run with the worker's definitions when it sent them (and say so), else warn why
        not; the thread keeps its own on any refusal."""
        mem = self._mem
        previous = mem.definitions_digest
        unchanged = UpgradeResult(status="unchanged", previous_digest=previous, digest=previous)
        new = result.snapshot
        if result.refused is not None or new is None or result.digest is None:
            if result.refused is not None:
                self._warn("definitions_refresh_refused", result.refused)
            return unchanged
        if mem.active_agent is not None and mem.active_agent not in new.agents:
            self._warn(
                "definitions_refresh_refused",
                f"the newer definitions lack agent {mem.active_agent!r}, which the thread "
                "handed off to; it keeps its definitions",
            )
            return unchanged
        mem.use_definitions(new)
        search_attributes.upsert_definitions_digest(result.digest)
        changes = [c.model_dump(by_alias=True) for c in result.changes]
        mem.emit(
            POLICY_CHANGED,
            {
                "policy": "definitions",
                "reason": reason,
                "definitionsPolicy": new.agent.definitions_policy,
                "previousDigest": previous,
                "definitionsDigest": result.digest,
                "snapshotId": new.snapshot_id,
                "changes": changes,
            },
        )
        return UpgradeResult(
            status="upgraded",
            previous_digest=previous,
            digest=result.digest,
            changes=result.changes,
        )

    def _input(self, snapshot: DefinitionSnapshot) -> DefinitionsRefreshInput | None:
        """What the worker compares with its own definitions (None before a digest)."""
        digest = self._mem.definitions_digest
        if digest is None:
            return None
        return DefinitionsRefreshInput(
            thread_id=self._mem.thread_id,
            agent=snapshot.agent.name,
            snapshot_id=snapshot.snapshot_id,
            digest=digest,
        )

    def _warn(self, code: str, message: str) -> None:
        entry = self._mem.incident(code, message)
        self._mem.emit("runtime.warning", {"code": code, "message": message, "incident": entry})


def _tools_queued(queue: deque[QueueEntry]) -> bool:
    """A queued tool runs before the session's first model call (intake.py)."""
    return any(entry.tool is not None for entry in queue)


def _turn_started(outbox: list[Event], turn_id: str) -> int | None:
    """Where the turn's `turn.started` waits in the outbox, if it is still unwritten."""
    return next(
        (i for i, e in enumerate(outbox) if e.type == "turn.started" and e.turn_id == turn_id),
        None,
    )
