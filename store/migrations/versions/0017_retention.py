"""Retention: each tenant's TTL for closed threads, and closed threads found by close time.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "retention_policies",
        sa.Column("tenant", sa.String(255), primary_key=True),
        sa.Column("closed_threads_ttl", sa.String(64), nullable=False),
        sa.Column("ttl_seconds", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_threads_status_updated_at", "threads", ["status", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_threads_status_updated_at", table_name="threads")
    op.drop_table("retention_policies")
