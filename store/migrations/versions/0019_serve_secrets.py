"""Secrets shared by every `weft serve` replica on the store (the key page tokens are
sealed with), so a token one replica gave is good at another and after a restart.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "serve_secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("secret", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("serve_secrets")
