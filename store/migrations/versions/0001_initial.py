"""Initial schema: messages, events, kv, snapshots and thread rows.

Revision ID: 0001
Revises:
Create Date: 2025-11-21

The columns are spelled out here rather than imported from `tables.py`, so this revision
keeps creating the same schema after the tables change in later revisions.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "messages",
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("id", ID, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text),
        sa.Column("name", ID),
        sa.Column("tool_calls", sa.JSON),
        sa.Column("tool_call_id", ID),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("silent", sa.Boolean, nullable=False),
        sa.Column("tool_status", sa.String(16)),
        sa.Column("reasoning_content", sa.Text),
        sa.Column("parent_id", ID),
        sa.Column("depth", sa.Integer, nullable=False),
        sa.Column("attachments", sa.JSON, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("side", sa.String(1)),
        sa.Column("turn_id", ID),
        sa.PrimaryKeyConstraint("thread_id", "id", name="pk_messages"),
    )
    op.create_index("ix_messages_thread_position", "messages", ["thread_id", "position"])
    op.create_index("ix_messages_thread_tool_call", "messages", ["thread_id", "tool_call_id"])

    op.create_table(
        "events",
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False),
        sa.Column("event_id", ID, nullable=False),
        sa.Column("type", ID, nullable=False),
        sa.Column("timestamp", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "sequence", name="pk_events"),
        sa.UniqueConstraint("thread_id", "event_id", name="uq_events_thread_event_id"),
    )
    op.create_index("ix_events_thread_type_sequence", "events", ["thread_id", "type", "sequence"])

    op.create_table(
        "kv",
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "key", name="pk_kv"),
    )

    op.create_table(
        "snapshots",
        sa.Column("snapshot_id", ID, primary_key=True),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )

    op.create_table(
        "threads",
        sa.Column("thread_id", ID, primary_key=True),
        sa.Column("agent", ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("session_id", ID),
        sa.Column("user_id", ID),
        sa.Column("parent_thread_id", ID),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stop_reason", sa.Text),
        sa.Column("env", sa.JSON, nullable=False),
        sa.Column("usage", sa.JSON, nullable=False),
        sa.Column("last_outcome", sa.Text),
    )
    op.create_index("ix_threads_created_at", "threads", ["created_at"])
    op.create_index("ix_threads_agent_created_at", "threads", ["agent", "created_at"])
    op.create_index("ix_threads_status_created_at", "threads", ["status", "created_at"])


def downgrade() -> None:
    op.drop_table("threads")
    op.drop_table("snapshots")
    op.drop_table("kv")
    op.drop_table("events")
    op.drop_table("messages")
