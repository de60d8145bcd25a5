"""Tenants: API keys (hashes only), the tenant of every thread, and the audit log of the
HTTP API's control actions.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(255)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(64), primary_key=True),
        sa.Column("tenant", ID, nullable=False),
        sa.Column("scopes", sa.JSON, nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])
    # Every thread that exists already belongs to `default`.
    with op.batch_alter_table("threads") as batch:
        batch.add_column(
            sa.Column("tenant", ID, nullable=False, server_default=sa.text("'default'"))
        )
    op.create_index("ix_threads_tenant_created_at", "threads", ["tenant", "created_at"])
    op.create_table(
        "audit_log",
        sa.Column("audit_id", sa.String(64), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("subject", sa.String(64), nullable=False),
        sa.Column("tenant", ID),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("route", ID, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("thread_id", ID),
        sa.Column("status", sa.Integer, nullable=False),
    )
    op.create_index("ix_audit_log_thread_at", "audit_log", ["thread_id", "at"])
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_index("ix_audit_log_thread_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_threads_tenant_created_at", table_name="threads")
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("tenant")
    op.drop_index("ix_api_keys_tenant", table_name="api_keys")
    op.drop_table("api_keys")
