"""History of each thread's key-value data and files, and the links of forks (time travel).

Existing values and files are seeded into the history as written after the thread's last
event so far: a fork at a later point sees them, one at an earlier point does not (their
past is unknown).

Revision ID: 0009
Revises: 0008
Create Date: 2027-01-20
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")
_LAST_SEQUENCE = (
    "COALESCE((SELECT MAX(e.sequence) FROM events e WHERE e.thread_id = {table}.thread_id), 0)"
)


def upgrade() -> None:
    op.create_table(
        "kv_history",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("key", sa.String(256), nullable=False),
        sa.Column("value", sa.Text),
        sa.Column("at_sequence", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_kv_history_thread_sequence", "kv_history", ["thread_id", "at_sequence"])
    op.create_table(
        "file_history",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("blob_digest", sa.String(64)),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("mime_type", sa.String(255)),
        sa.Column("at_sequence", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_file_history_thread_sequence", "file_history", ["thread_id", "at_sequence"])
    op.create_table(
        "thread_links",
        sa.Column("thread_id", sa.String(255), primary_key=True),
        sa.Column("forked_from", sa.JSON),
        sa.Column("successor_thread_id", sa.String(255)),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute(
        "INSERT INTO kv_history (thread_id, key, value, at_sequence) "
        f"SELECT thread_id, key, value, {_LAST_SEQUENCE.format(table='kv')} FROM kv"
    )
    op.execute(
        "INSERT INTO file_history "
        "(thread_id, path, kind, blob_digest, size, mime_type, at_sequence) "
        "SELECT thread_id, path, kind, blob_digest, size, mime_type, "
        f"{_LAST_SEQUENCE.format(table='files')} FROM files"
    )


def downgrade() -> None:
    op.drop_table("thread_links")
    op.drop_index("ix_file_history_thread_sequence", table_name="file_history")
    op.drop_table("file_history")
    op.drop_index("ix_kv_history_thread_sequence", table_name="kv_history")
    op.drop_table("kv_history")
