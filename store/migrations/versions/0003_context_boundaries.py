"""Context compaction boundaries.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "context_boundaries",
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("boundary_id", ID, nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("first_kept_position", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("created_at", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "boundary_id", name="pk_context_boundaries"),
        sa.UniqueConstraint("thread_id", "ordinal", name="uq_context_boundaries_thread_ordinal"),
    )


def downgrade() -> None:
    op.drop_table("context_boundaries")
