"""What a model step reads before its request, in one snapshot.

A step read the thread row (for its env), the budget ledger, the boundary in force with
its pinned messages, and the transcript since it, each in a transaction of its own: four
begins and commits a step where one does, and four views of a store that may change in
between. One snapshot reads them all (SQLite's deferred transaction in WAL mode,
PostgreSQL's REPEATABLE READ), the tenant's quota joined into the ledger's statement
(`tenant_quotas.ledger_and_quota`: a tenant without one costs the step nothing), the
transcript through the worker's cache as before, and
the thread's env from the copy this worker keeps at the workflow's count of env writes
when it has one (thread_env_rows.py), as `tool.call` does.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime

from weft.contract.budget import BudgetState
from weft.contract.context import ContextBoundary
from weft.contract.messages import Message
from weft.store.boundaries import boundary_in
from weft.store.budget_rows import state_of
from weft.store.database import Database
from weft.store.messages import messages_by_ids
from weft.store.tenant_quotas import TenantQuota, ledger_and_quota
from weft.store.thread_env_rows import ThreadEnvRow
from weft.store.threads import Threads
from weft.store.transcripts import MessageJson, Transcripts


@dataclass(frozen=True)
class StepRead:
    """One committed state of what a model step needs."""

    env: ThreadEnvRow | None  # the thread's user and own env; None: it has no row
    budget: BudgetState | None
    quota: TenantQuota | None  # the tenant's quota, spent or not; None: none, or not read
    boundary: ContextBoundary | None
    pinned: list[Message]
    transcript: list[MessageJson]  # as the worker's cache keeps them (`messages_of` parses)


class StepReads:
    """Reads a step's thread row, ledger, boundary and transcript together."""

    def __init__(self, database: Database, threads: Threads, transcripts: Transcripts) -> None:
        self._db = database
        self._threads = threads
        self._transcripts = transcripts

    def read(
        self,
        thread_id: str,
        *,
        env_version: Hashable | None,
        boundary_id: str | None,
        budget_root: str | None,
        check_budget: bool,
        now: datetime,
    ) -> StepRead:
        """The thread's env (kept at `env_version`, or read), with `check_budget` the
        ledger of `budget_root` (None without one) and its tenant's quota, the boundary
        `boundary_id` with its pinned messages, and the main transcript from it on."""
        with self._db.snapshot() as connection:
            env = self._threads.env_row_in(connection, thread_id, env_version)
            checked = ledger_and_quota(connection, budget_root, thread_id) if check_budget else None
            ledger = None if checked is None else checked.ledger
            boundary = boundary_in(connection, thread_id, boundary_id) if boundary_id else None
            pinned = (
                messages_by_ids(connection, thread_id, boundary.pinned_message_ids)
                if boundary
                else []
            )
            first = boundary.first_kept_position if boundary else 0
            transcript = self._transcripts.texts_since_in(connection, thread_id, first)
        return StepRead(
            env=env,
            budget=None if ledger is None else state_of(ledger, now),
            quota=None if checked is None else checked.quota,
            boundary=boundary,
            pinned=pinned,
            transcript=transcript,
        )
