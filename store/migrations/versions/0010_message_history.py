"""Each message as it was before every update or delete of it, so a fork copies a message
as it was at its point (time travel). Changes made before this revision are not known: a
fork copies such a message as it is now.

Revision ID: 0010
Revises: 0009
Create Date: 2027-01-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "message_history",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("change", sa.String(8), nullable=False),
        sa.Column("message", sa.JSON, nullable=False),
        sa.Column("at_sequence", sa.BigInteger, nullable=False),
    )
    op.create_index(
        "ix_message_history_thread_sequence", "message_history", ["thread_id", "at_sequence"]
    )


def downgrade() -> None:
    op.drop_index("ix_message_history_thread_sequence", table_name="message_history")
    op.drop_table("message_history")
