"""Tasks: one row per task, folded from its `task.*` events.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("task_id", ID, primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("assignee", ID, nullable=False),
        sa.Column("session_id", ID),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tasks_status_updated", "tasks", ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_tasks_status_updated", table_name="tasks")
    op.drop_table("tasks")
