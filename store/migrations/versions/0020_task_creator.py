"""The thread that created each task (`tasks.created_by_thread`, its `scope.threadId`),
indexed, so the tasks a thread's subagents made are found without reading every task's
JSON (`store/subagents.py` `tasks_created_by`). Existing rows are filled from the JSON.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TASKS = sa.table(
    "tasks",
    sa.column("task_id", sa.String(255)),
    sa.column("data", sa.JSON),
    sa.column("created_by_thread", sa.String(255)),
)


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("created_by_thread", sa.String(255)))
    op.create_index("ix_tasks_created_by_thread", "tasks", ["created_by_thread", "created_at"])
    # The JSON path is read once, here, on either dialect; from now on the column is
    # written with the row (`store/tasks.py`).
    creator = _TASKS.c.data[("scope", "threadId")].as_string()
    op.execute(_TASKS.update().where(creator.is_not(None)).values(created_by_thread=creator))


def downgrade() -> None:
    op.drop_index("ix_tasks_created_by_thread", table_name="tasks")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("created_by_thread")
