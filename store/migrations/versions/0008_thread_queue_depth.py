"""The queue depth of each thread, projected from its `queue.changed` events (metrics).

Revision ID: 0008
Revises: 0007
Create Date: 2027-01-12
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.add_column(
            sa.Column("queue_depth", sa.Integer, nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("queue_depth")
