"""Budget ledgers: what a tree of threads may spend and has spent.

Revision ID: 0007
Revises: 0006
Create Date: 2027-01-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "budgets",
        sa.Column("root_thread_id", sa.String(255), nullable=False),
        sa.Column("limits", sa.JSON, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("cost_usd", sa.Float, nullable=False),
        sa.Column("model_calls", sa.BigInteger, nullable=False),
        sa.Column("cost_unknown", sa.Boolean, nullable=False),
        sa.Column("low_emitted", sa.JSON, nullable=False),
        sa.Column("blocked", sa.String(32), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("root_thread_id", name="pk_budgets"),
    )


def downgrade() -> None:
    op.drop_table("budgets")
