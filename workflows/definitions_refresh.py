"""Definitions versions: a thread takes newer definitions only between turns, and says so.

At each new session of turns a `latest` thread asks its worker (`definitions.refresh`, a
local activity: a marker in history, no task of its own) whether it serves a newer version
of the thread's agent; a `pinned` thread asks only once `upgrade_definitions` was called.
A move is recorded as `policy.changed` with both digests and what changed; the snapshot
the thread then carries is in the store, so any worker runs its turns with it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import (
    ACTIVITY_DEFINITIONS_REFRESH,
    POLICY_CHANGED,
    UPDATE_UPGRADE_DEFINITIONS,
    DefinitionsRefreshInput,
    DefinitionsRefreshResult,
    UpgradeResult,
)
from weft.workflows import search_attributes
from weft.workflows.failures import failure_text
from weft.workflows.views import Facts, Identity

# Asked once per run, at its start, as `TRUTHFUL_LOG_PATCH` is: runs recorded before it
# neither refresh nor upsert the digest's search attribute, so they replay as they ran.
DEFINITIONS_VERSION_PATCH = "definitions-version-v1"


class VersionView(Facts, Identity, Protocol):
    """The definitions a thread runs with, their digest, and a pending upgrade (carried)."""

    definitions_upgrade: bool

    @property
    def snapshot(self) -> DefinitionSnapshot | None: ...

    @property
    def definitions_digest(self) -> str | None: ...

    active_agent: str | None

    def use_definitions(self, snapshot: DefinitionSnapshot) -> None: ...

    def is_idle(self) -> bool: ...


class DefinitionsRefresh:
    """Moves the thread to newer definitions at turn boundaries, as its agent's policy says."""

    def __init__(self, mem: VersionView) -> None:
        self._mem = mem
        self.in_use = False
        self._upgraded: UpgradeResult | None = None

    def start_run(self) -> None:
        """Ask the patch (first, with the run's others), and state the digest of a thread
        that continued from a run that did not record it."""
        self.in_use = workflow.patched(DEFINITIONS_VERSION_PATCH)
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

    async def _refresh(self, snapshot: DefinitionSnapshot, reason: str) -> UpgradeResult:
        mem = self._mem
        previous = mem.definitions_digest
        unchanged = UpgradeResult(status="unchanged", previous_digest=previous, digest=previous)
        if previous is None:
            return unchanged
        try:
            result: DefinitionsRefreshResult = await workflow.execute_local_activity(
                ACTIVITY_DEFINITIONS_REFRESH,
                DefinitionsRefreshInput(
                    thread_id=mem.thread_id,
                    agent=snapshot.agent.name,
                    snapshot_id=snapshot.snapshot_id,
                    digest=previous,
                ),
                result_type=DefinitionsRefreshResult,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=5),
                summary="definitions refresh",
            )
        except ActivityError as err:
            # The thread keeps the definitions it has: a refresh is never worth a stuck turn.
            self._warn("definitions_refresh_failed", failure_text(err))
            return unchanged
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

    def _warn(self, code: str, message: str) -> None:
        entry = self._mem.incident(code, message)
        self._mem.emit("runtime.warning", {"code": code, "message": message, "incident": entry})
