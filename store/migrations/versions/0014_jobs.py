"""Jobs: one row per job and one per item, folded from the job's `job.*` events.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("job_id", ID, primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("assignee", ID, nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_jobs_status_updated", "jobs", ["status", "updated_at"])
    op.create_table(
        "job_items",
        sa.Column("job_id", ID, nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("item_id", ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("data", sa.JSON, nullable=False),
        sa.PrimaryKeyConstraint("job_id", "idx"),
        sa.UniqueConstraint("item_id", name="uq_job_items_item_id"),
    )
    op.create_index("ix_job_items_job_status_idx", "job_items", ["job_id", "status", "idx"])


def downgrade() -> None:
    op.drop_index("ix_job_items_job_status_idx", table_name="job_items")
    op.drop_table("job_items")
    op.drop_index("ix_jobs_status_updated", table_name="jobs")
    op.drop_table("jobs")
