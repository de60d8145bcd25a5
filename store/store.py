"""The `Store`: one database holding weft's aggregates, each behind its own attribute.

`store.messages`, `store.transcripts` (the cached main transcript), `store.events`, `store.values`, `store.snapshots`, `store.threads`,
`store.subagents`, `store.variable_requests`, `store.files`, `store.boundaries`
(context compaction boundaries), `store.effects` (scheduled effects) and
`store.idempotency` (the HTTP API's idempotency keys), `store.budgets` (budget
ledgers) and `store.definitions_versions` (definitions digests) share one `Database`, so every write follows the same transaction, locking and
retry rules. Every method is
synchronous and opens its own short transaction; activities call them through
`asyncio.to_thread`. Writes are idempotent so a retried activity stores nothing twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Engine

from weft.activities.crypto import Keyring
from weft.store.api_keys import ApiKeys
from weft.store.audit import AuditLog
from weft.store.boundaries import Boundaries
from weft.store.budgets import Budgets
from weft.store.database import Database
from weft.store.definitions_versions import DefinitionsVersions
from weft.store.deletion import Deletion
from weft.store.effects import Effects
from weft.store.events import Events
from weft.store.files import FileStore
from weft.store.idempotency import IdempotencyKeys
from weft.store.jobs import Jobs
from weft.store.messages import Messages
from weft.store.migrate import upgrade
from weft.store.rate_limits import RateLimits
from weft.store.retention import RetentionPolicies
from weft.store.serve_secrets import ServeSecrets
from weft.store.snapshots import Snapshots
from weft.store.step_reads import StepReads
from weft.store.subagents import Subagents
from weft.store.tasks import Tasks
from weft.store.tenant_quotas import TenantQuotas
from weft.store.thread_cache_budget import ThreadCacheBudget
from weft.store.threads import Threads
from weft.store.transcripts import Transcripts
from weft.store.urls import create_store_engine
from weft.store.values import Values
from weft.store.variable_requests import VariableRequests

if TYPE_CHECKING:
    from weft.store.protocols import StoreLike


class Store:
    """Durable storage for weft, over SQLite (embedded) or PostgreSQL (shared).

    Implements `StoreLike` and each aggregate's Protocol (store/protocols.py).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        keyring: Keyring | None = None,
        caches: ThreadCacheBudget | None = None,
    ) -> None:
        self._keyring = keyring
        # How many threads its per-thread caches keep, and who forgets an evicted one: a
        # worker's follows its workflow cache (thread_cache_budget.py).
        self.caches = caches = caches or ThreadCacheBudget()
        self._database = Database(engine, cached_threads=caches.threads)
        # Built once: each aggregate is a thin view on the shared database.
        self.messages = Messages(self._database)
        # Holds the worker's cached transcripts: one per Store, shared by its activities.
        self.transcripts = Transcripts(self._database, max_threads=caches.threads)
        self.events = Events(self._database)
        self.values = Values(self._database)
        self.snapshots = Snapshots(self._database, keyring)
        self.definitions_versions = DefinitionsVersions(self._database)
        self.threads = Threads(self._database, keyring, cached_threads=caches.threads)
        self.subagents = Subagents(self._database)
        self.variable_requests = VariableRequests(self._database, keyring)
        self.files = FileStore(self._database)
        self.boundaries = Boundaries(self._database)
        self.effects = Effects(self._database, keyring)
        # The HTTP API's idempotency keys (api/idempotency.py).
        self.idempotency = IdempotencyKeys(self._database)
        # Budget ledgers of thread trees (docs/budgets.md).
        self.budgets = Budgets(self._database)
        # Rate limits shared by every worker (docs/rate-limits.md).
        self.rate_limits = RateLimits(self._database)
        # Secrets every `weft serve` replica shares (its page tokens' key).
        self.serve_secrets = ServeSecrets(self._database)
        # Tasks and their logs (docs/tasks.md).
        self.tasks = Tasks(self._database)
        # Jobs: batches of items, each run as a task (docs/jobs.md).
        self.jobs = Jobs(self._database)
        # The HTTP API's keys, by tenant and scope (docs/tenants.md).
        self.api_keys = ApiKeys(self._database)
        # Who did each control action over HTTP.
        self.audit = AuditLog(self._database)
        # Deleting a thread's rows and the blobs nobody else refers to (docs/deletion.md).
        self.deletion = Deletion(self._database)
        # Each tenant's TTL for closed threads, and the threads past theirs (docs/deletion.md).
        self.retention = RetentionPolicies(self._database)
        # Each tenant's active-thread limit and budget (docs/tenants.md#quotas).
        self.tenant_quotas = TenantQuotas(self._database)
        self.step_reads = StepReads(self._database, self.threads, self.transcripts)
        caches.join("transcripts", self.transcripts)
        caches.join("env rows", self.threads.env_rows)
        caches.join("thread links", self._database.thread_links)

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        keyring: Keyring | None = None,
        caches: ThreadCacheBudget | None = None,
    ) -> Store:
        """Connect to `url` and, unless `migrate` is false, upgrade the schema to head.

        With a `keyring`, thread env is encrypted at rest (`store/sealed.py`); with
        `caches`, its per-thread caches keep that budget's threads (a worker's).
        """
        engine = create_store_engine(url)
        if migrate:
            try:
                upgrade(engine)
            except BaseException:
                engine.dispose()
                raise
        return cls(engine, keyring=keyring, caches=caches)

    @property
    def engine(self) -> Engine:
        """The underlying engine, for health checks and tests."""
        return self._database.engine

    @property
    def database(self) -> Database:
        """The shared database, for views that replace an aggregate (effect_writes.py)."""
        return self._database

    @property
    def keyring(self) -> Keyring | None:
        """The keys that seal env at rest, or None (stored as given)."""
        return self._keyring

    def close(self) -> None:
        """Close every pooled connection."""
        self._database.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _implements_store_like(store: Store) -> StoreLike:
    """Never called: mypy checks here that `Store` implements the Protocols."""
    return store
