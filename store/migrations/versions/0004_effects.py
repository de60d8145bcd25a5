"""Scheduled effects.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "effects",
        sa.Column("thread_id", ID, nullable=False),
        sa.Column("effect_id", ID, nullable=False),
        sa.Column("name", ID, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("scheduled_at", sa.String(64), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", "effect_id", name="pk_effects"),
    )
    op.create_index("ix_effects_thread_status", "effects", ["thread_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_effects_thread_status", table_name="effects")
    op.drop_table("effects")
