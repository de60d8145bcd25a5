"""Definitions versions: each digest of an agent's definitions, once, with the snapshot that
holds its content, so any worker can run a thread's turns with the version it is on.

Revision ID: 0011
Revises: 0010
Create Date: 2027-02-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "definitions_versions",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("agent", sa.String(255), nullable=False),
        sa.Column("snapshot_id", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("definitions_versions")
