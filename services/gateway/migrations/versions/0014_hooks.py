"""hooks: inbound webhooks (a signed call starts a task of a workflow); callback_deliveries: the
completion callbacks of tasks that named a webhook URL, one row per task run (the delivery log)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hooks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("workflow_id", sa.String(length=64), nullable=False),
        sa.Column("input_mapping", sa.JSON(), nullable=True),
        sa.Column("secret_enc", sa.Text(), nullable=False),
        sa.Column("signature", sa.String(length=16), nullable=False),
        sa.Column("webhook", sa.String(length=2000), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("last_called_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("hooks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_hooks_user_id"), ["user_id"], unique=False)
    op.create_table(
        "callback_deliveries",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=2000), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_status_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "run", name="uq_callback_deliveries_task_run"),
    )
    with op.batch_alter_table("callback_deliveries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_callback_deliveries_task_id"), ["task_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_callback_deliveries_user_id"), ["user_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("callback_deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_callback_deliveries_user_id"))
        batch_op.drop_index(batch_op.f("ix_callback_deliveries_task_id"))
    op.drop_table("callback_deliveries")
    with op.batch_alter_table("hooks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_hooks_user_id"))
    op.drop_table("hooks")
