"""Rate limits shared by every worker: one row per limit key (until when a provider's
Retry-After blocks it) and one per request granted in the key's window.

Revision ID: 0012
Revises: 0011
Create Date: 2027-02-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_keys",
        sa.Column("limit_key", sa.String(255), primary_key=True),
        sa.Column("blocked_until", sa.Float, nullable=False),
    )
    op.create_table(
        "rate_limit_grants",
        sa.Column("grant_id", sa.String(255), primary_key=True),
        sa.Column("limit_key", sa.String(255), nullable=False),
        sa.Column("starts_at", sa.Float, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_rate_limit_grants_key_start", "rate_limit_grants", ["limit_key", "starts_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_rate_limit_grants_key_start", table_name="rate_limit_grants")
    op.drop_table("rate_limit_grants")
    op.drop_table("rate_limit_keys")
