"""Transcript revisions: what lets a worker cache a thread's transcript.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "transcript_revisions",
        sa.Column("thread_id", sa.String(255), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("thread_id", name="pk_transcript_revisions"),
    )


def downgrade() -> None:
    op.drop_table("transcript_revisions")
