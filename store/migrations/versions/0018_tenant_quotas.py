"""Tenant quotas (each tenant's active-thread limit and budget, and what it spent), and
the tenant of each task and job (`default` for those made before tenants).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tenant_quotas",
        sa.Column("tenant", sa.String(255), primary_key=True),
        sa.Column("max_active_threads", sa.Integer),
        sa.Column("max_tokens", sa.BigInteger),
        sa.Column("max_cost_usd", sa.Float),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    for table in ("tasks", "jobs"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column(
                    "tenant", sa.String(255), nullable=False, server_default=sa.text("'default'")
                )
            )
        op.create_index(f"ix_{table}_tenant_updated", table, ["tenant", "updated_at"])


def downgrade() -> None:
    for table in ("tasks", "jobs"):
        op.drop_index(f"ix_{table}_tenant_updated", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("tenant")
    op.drop_table("tenant_quotas")
