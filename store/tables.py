"""The store's tables, as SQLAlchemy Core; the Alembic migrations create the same schema."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)

# Longest id, role, status or name the schema holds; ids are uuids or derived strings.
ID_LENGTH = 255


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend.

    SQLite keeps no offset, so values are converted to UTC on the way in and marked as
    UTC on the way out.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("datetimes written to the store must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if not isinstance(value, datetime):
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class FreeText(TypeDecorator[str]):
    """Text that may hold any string, NUL characters included.

    PostgreSQL text cannot hold NUL, and a tool result containing one must not make its
    write fail on every retry; there NUL becomes U+FFFD. SQLite keeps the text as given.
    """

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        if value is not None and dialect.name == "postgresql" and "\x00" in value:
            return value.replace("\x00", "\ufffd")
        return value


metadata = MetaData()

messages = Table(
    "messages",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("id", String(ID_LENGTH), nullable=False),
    Column("position", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("content", FreeText),
    Column("name", String(ID_LENGTH)),
    Column("tool_calls", JSON),
    Column("tool_call_id", String(ID_LENGTH)),
    Column("created_at", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("silent", Boolean, nullable=False),
    Column("tool_status", String(16)),
    Column("reasoning_content", FreeText),
    Column("parent_id", String(ID_LENGTH)),
    Column("depth", Integer, nullable=False),
    Column("attachments", JSON, nullable=False),
    Column("metadata", JSON, nullable=False),
    Column("side", String(1)),
    Column("turn_id", String(ID_LENGTH)),
    PrimaryKeyConstraint("thread_id", "id", name="pk_messages"),
    # Not unique: positions come from the workflow, and a stale attempt must not wedge.
    Index("ix_messages_thread_position", "thread_id", "position"),
    Index("ix_messages_thread_tool_call", "thread_id", "tool_call_id"),
)

events = Table(
    "events",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("sequence", BigInteger, nullable=False),
    Column("event_id", String(ID_LENGTH), nullable=False),
    Column("type", String(ID_LENGTH), nullable=False),
    Column("timestamp", String(64), nullable=False),
    Column("data", JSON, nullable=False),
    PrimaryKeyConstraint("thread_id", "sequence", name="pk_events"),
    UniqueConstraint("thread_id", "event_id", name="uq_events_thread_event_id"),
    Index("ix_events_thread_type_sequence", "thread_id", "type", "sequence"),
)

kv = Table(
    "kv",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("key", String(256), nullable=False),
    # The JSON text exactly as measured against the size cap.
    Column("value", Text, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("thread_id", "key", name="pk_kv"),
)

snapshots = Table(
    "snapshots",
    metadata,
    Column("snapshot_id", String(ID_LENGTH), primary_key=True),
    Column("data", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# One row per definitions version (`definitions/digest.py`): the content is the snapshot
# it names, stored once in `snapshots`.
definitions_versions = Table(
    "definitions_versions",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("agent", String(ID_LENGTH), nullable=False),
    Column("snapshot_id", String(ID_LENGTH), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

threads = Table(
    "threads",
    metadata,
    Column("thread_id", String(ID_LENGTH), primary_key=True),
    Column("agent", String(ID_LENGTH), nullable=False),
    Column("status", String(32), nullable=False),
    Column("session_id", String(ID_LENGTH)),
    Column("user_id", String(ID_LENGTH)),
    Column("parent_thread_id", String(ID_LENGTH)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("stop_reason", FreeText),
    Column("env", JSON, nullable=False),
    Column("usage", JSON, nullable=False),
    Column("last_outcome", FreeText),
    # Projected from the thread's newest `queue.changed` (queue_rows.py), never upserted.
    Column("queue_depth", Integer, nullable=False, server_default=text("0")),
    # Set once, at the thread's start (docs/tenants.md); never changed by an upsert.
    Column("tenant", String(ID_LENGTH), nullable=False, server_default=text("'default'")),
    Index("ix_threads_created_at", "created_at"),
    Index("ix_threads_agent_created_at", "agent", "created_at"),
    Index("ix_threads_status_created_at", "status", "created_at"),
    Index("ix_threads_tenant_created_at", "tenant", "created_at"),
    # Closed threads by close time: what retention sweeps read (store/retention.py).
    Index("ix_threads_status_updated_at", "status", "updated_at"),
)

# Content-addressed, immutable bytes. Files of any thread point here, so copying a file
# between threads (Runtime §8) is a new `files` row, never a second copy of the bytes.
blobs = Table(
    "blobs",
    metadata,
    Column("digest", String(64), primary_key=True),  # sha256, hex
    Column("size", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# Each thread's own filesystem: absolute paths such as `/attachments/report.pdf`.
files = Table(
    "files",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("kind", String(8), nullable=False),  # file | dir
    Column("blob_digest", String(64)),  # null for directories
    Column("size", BigInteger, nullable=False),
    Column("mime_type", String(ID_LENGTH)),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("thread_id", "path", name="pk_files"),
    # Whether anything still refers to a blob (store/deletion.py).
    Index("ix_files_blob_digest", "blob_digest"),
)

# The subagent registry (Runtime §7.1), one row per child, projected from the parent's
# `subagent.*` events in the same commit that stores them.
subagents = Table(
    "subagents",
    metadata,
    Column("parent_thread_id", String(ID_LENGTH), nullable=False),
    Column("reference", String(ID_LENGTH), nullable=False),  # the child's thread id
    Column("name", FreeText, nullable=False),
    Column("agent", String(ID_LENGTH), nullable=False),
    Column("status", String(32), nullable=False),
    Column("data", JSON, nullable=False),  # the rest of the registry entry
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("parent_thread_id", "reference", name="pk_subagents"),
)

# Scoped-variable bootstrap requests (Runtime §7.5): a deferred `subagent_create` waiting
# for values. `values` is sealed like thread env.
variable_requests = Table(
    "variable_requests",
    metadata,
    Column("request_id", String(ID_LENGTH), primary_key=True),
    Column("parent_thread_id", String(ID_LENGTH), nullable=False),
    Column("status", String(16), nullable=False),  # pending | provided
    Column("data", JSON, nullable=False),  # what is asked for, no values
    Column("values", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_variable_requests_parent", "parent_thread_id"),
)

# Context compaction boundaries (contract/context.py), oldest first by `ordinal`, which the
# writer numbers per thread under the thread lock; `data` is the whole boundary.
context_boundaries = Table(
    "context_boundaries",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("boundary_id", String(ID_LENGTH), nullable=False),
    Column("ordinal", Integer, nullable=False),
    Column("first_kept_position", Integer, nullable=False),
    Column("kind", String(16), nullable=False),  # summary | cut
    Column("reason", String(16), nullable=False),  # budget | overflow | requested | tool
    Column("created_at", String(64), nullable=False),  # the boundary's ISO timestamp
    Column("data", JSON, nullable=False),
    PrimaryKeyConstraint("thread_id", "boundary_id", name="pk_context_boundaries"),
    UniqueConstraint("thread_id", "ordinal", name="uq_context_boundaries_thread_ordinal"),
)

# Scheduled effects (contract/effects.py), projected from their `job.*` events; the
# workflow's timers are the truth, this is what ThreadState reads. `result` is the
# completed run's outcome, so a retried `effect.run` returns it instead of running again.
effects = Table(
    "effects",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("effect_id", String(ID_LENGTH), nullable=False),
    Column("name", String(ID_LENGTH), nullable=False),
    # pending | running | completed | failed | removed
    Column("status", String(16), nullable=False),
    Column("scheduled_at", String(64), nullable=False),  # when due, ISO-8601 UTC
    Column("data", JSON, nullable=False),  # the ScheduledEffect
    Column("result", JSON, nullable=True),
    Column("updated_at", UTCDateTime, nullable=False),
    PrimaryKeyConstraint("thread_id", "effect_id", name="pk_effects"),
    Index("ix_effects_thread_status", "thread_id", "status"),
)

# Bumped in the transaction of every change to a stored message other than an append
# (update, delete), so a worker's cached transcript (store/transcripts.py) knows when a
# tail read is not enough.
transcript_revisions = Table(
    "transcript_revisions",
    metadata,
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("revision", BigInteger, nullable=False),
    PrimaryKeyConstraint("thread_id", name="pk_transcript_revisions"),
)

# Idempotency keys of the HTTP API's POST requests (api/idempotency.py): the first request
# with a key claims it (`pending`), and its final reply is kept (`done`) so a retry gets
# the same reply without acting again. `claim_id` says which attempt holds a pending key,
# so an attempt that was given up on cannot record over the one that took over.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(ID_LENGTH), primary_key=True),
    Column("scope", Text, nullable=False),  # "POST /threads/…": what the key was used for
    Column("fingerprint", String(64), nullable=False),  # sha256 of scope and canonical body
    Column("claim_id", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # pending | done
    Column("status", Integer),  # the reply's HTTP status, once done
    Column("response", JSON),  # the reply's JSON body, once done
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_idempotency_keys_created_at", "created_at"),
)

# One ledger per budget tree, keyed by its root thread: limits, spend and which limits
# already announced `quota.low` (store/budgets.py).
budgets = Table(
    "budgets",
    metadata,
    Column("root_thread_id", String(ID_LENGTH), primary_key=True),
    Column("limits", JSON, nullable=False),  # Budget, by alias, without unset caps
    Column("started_at", UTCDateTime, nullable=False),  # wall time counts from here
    Column("tokens", BigInteger, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Column("model_calls", BigInteger, nullable=False),
    Column("cost_unknown", Boolean, nullable=False),
    Column("low_emitted", JSON, nullable=False),  # limit names past 80 % and announced
    Column("blocked", String(32)),  # the limit that stopped the tree, until raised
    Column("updated_at", UTCDateTime, nullable=False),
)

# Every change of a key (a set, or a delete as a null `value`), kept so a fork reads the
# values as of an event of the thread (docs/time-travel.md). `at_sequence` is the thread's
# last event sequence when the write committed: the write came after that event and before
# the next. One insert per write; `kv` stays the current values.
kv_history = Table(
    "kv_history",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("key", String(256), nullable=False),
    Column("value", Text),  # null: the key was deleted
    Column("at_sequence", BigInteger, nullable=False),
    Index("ix_kv_history_thread_sequence", "thread_id", "at_sequence"),
)

# Every change of a path of a thread's filesystem, as `kv_history` for keys: the row it
# left (`kind` file | dir), or `gone` when it was removed. The bytes stay in `blobs`.
file_history = Table(
    "file_history",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("kind", String(8), nullable=False),  # file | dir | gone
    Column("blob_digest", String(64)),
    Column("size", BigInteger, nullable=False),
    Column("mime_type", String(ID_LENGTH)),
    Column("at_sequence", BigInteger, nullable=False),
    Index("ix_file_history_thread_sequence", "thread_id", "at_sequence"),
    Index("ix_file_history_blob_digest", "blob_digest"),
)

# A message as it was before each change of it (an update, or a delete), as `kv_history`
# for keys: `at_sequence` is the thread's last event sequence when the change committed, so
# a fork as of event P reads a message changed at or after P as its first such row holds it.
message_history = Table(
    "message_history",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("thread_id", String(ID_LENGTH), nullable=False),
    Column("message_id", String(ID_LENGTH), nullable=False),
    Column("change", String(8), nullable=False),  # updated | deleted
    Column("message", JSON, nullable=False),  # the message before the change, as stored
    Column("at_sequence", BigInteger, nullable=False),
    Index("ix_message_history_thread_sequence", "thread_id", "at_sequence"),
)

# Where a thread came from and where it went (docs/time-travel.md): a fork names its source
# and the point it was taken at; a rewound source names its successor.
thread_links = Table(
    "thread_links",
    metadata,
    Column("thread_id", String(ID_LENGTH), primary_key=True),
    Column("forked_from", JSON),  # {threadId, atSequence, atTurnId, rewind}
    Column("successor_thread_id", String(ID_LENGTH)),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Tasks (docs/tasks.md), one row per task, folded from the task's own `task.*` events
# (stored under the task id) in the commit that stores them.
tasks = Table(
    "tasks",
    metadata,
    Column("task_id", String(ID_LENGTH), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("assignee", String(ID_LENGTH), nullable=False),
    Column("session_id", String(ID_LENGTH)),
    Column("data", JSON, nullable=False),  # the TaskRecord, as the events made it
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # The task's `scope.tenant` (none: `default`), set at its creation (docs/tenants.md).
    Column("tenant", String(ID_LENGTH), nullable=False, server_default=text("'default'")),
    # The thread that created the task (its `scope.threadId`; none: a client's), set at
    # its creation: the tasks a thread's subagents made are found by index (migration 0020).
    Column("created_by_thread", String(ID_LENGTH)),
    Index("ix_tasks_status_updated", "status", "updated_at"),
    Index("ix_tasks_tenant_updated", "tenant", "updated_at"),
    Index("ix_tasks_created_by_thread", "created_by_thread", "created_at"),
)

# API keys of the HTTP API (store/api_keys.py, docs/tenants.md): only a hash of each
# secret is kept; a key is refused once expired or revoked.
api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", String(64), primary_key=True),
    Column("tenant", String(ID_LENGTH), nullable=False),
    Column("scopes", JSON, nullable=False),  # list of scope names
    Column("secret_hash", String(64), nullable=False),  # sha256 of the secret, hex
    Column("description", FreeText),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime),
    Column("revoked_at", UTCDateTime),
    Index("ix_api_keys_tenant", "tenant"),
)

# Who did each control action of the HTTP API (store/audit.py): every authenticated POST,
# with its outcome, written when its reply starts.
audit_log = Table(
    "audit_log",
    metadata,
    Column("audit_id", String(64), primary_key=True),
    Column("at", UTCDateTime, nullable=False),
    Column("subject", String(64), nullable=False),  # a key id, or `token`
    Column("tenant", String(ID_LENGTH)),  # the key's tenant; null for the server's token
    Column("method", String(8), nullable=False),
    Column("route", String(ID_LENGTH), nullable=False),  # the route's template
    Column("path", FreeText, nullable=False),
    Column("thread_id", String(ID_LENGTH)),  # the thread the path names, if any
    Column("status", Integer, nullable=False),
    Index("ix_audit_log_thread_at", "thread_id", "at"),
    Index("ix_audit_log_at", "at"),
)

# Each tenant's retention: how long its closed threads are kept (store/retention.py).
retention_policies = Table(
    "retention_policies",
    metadata,
    Column("tenant", String(ID_LENGTH), primary_key=True),
    Column("closed_threads_ttl", String(64), nullable=False),  # as set: `90d`
    Column("ttl_seconds", BigInteger, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Each tenant's quotas and what its threads spent since they were set
# (store/tenant_quotas.py, docs/tenants.md#quotas).
tenant_quotas = Table(
    "tenant_quotas",
    metadata,
    Column("tenant", String(ID_LENGTH), primary_key=True),
    Column("max_active_threads", Integer),  # null: no limit
    Column("max_tokens", BigInteger),
    Column("max_cost_usd", Float),
    Column("tokens", BigInteger, nullable=False),
    Column("cost_usd", Float, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

# Secrets every `weft serve` replica on the store shares, by name: made once, by whichever
# replica needs one first, and never changed (store/serve_secrets.py). No thread data.
serve_secrets = Table(
    "serve_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("secret", LargeBinary, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
