"""Thread filesystems, blobs, the subagent registry and variable bootstrap requests.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "files",
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("blob_digest", sa.String(64)),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("mime_type", ID),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "path", name="pk_files"),
    )
    op.create_table(
        "subagents",
        sa.Column("parent_thread_id", ID, nullable=False),
        sa.Column("reference", ID, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("agent", ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("parent_thread_id", "reference", name="pk_subagents"),
    )
    op.create_table(
        "variable_requests",
        sa.Column("request_id", ID, primary_key=True),
        sa.Column("parent_thread_id", ID, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("values", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_variable_requests_parent", "variable_requests", ["parent_thread_id"])


def downgrade() -> None:
    op.drop_index("ix_variable_requests_parent", table_name="variable_requests")
    op.drop_table("variable_requests")
    op.drop_table("subagents")
    op.drop_table("files")
    op.drop_table("blobs")
