"""Blob references by digest: deleting a thread deletes a blob only when no file of a
surviving thread (now or in its history) refers to it, and asks so by these indexes.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_files_blob_digest", "files", ["blob_digest"])
    op.create_index("ix_file_history_blob_digest", "file_history", ["blob_digest"])


def downgrade() -> None:
    op.drop_index("ix_file_history_blob_digest", table_name="file_history")
    op.drop_index("ix_files_blob_digest", table_name="files")
