"""schedules, schedule_fires: schedules held and fired by JetStream message schedules, and each
fire's outcome (the task it started, or why it started none)

Revision ID: 0011
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("workflow_id", sa.String(length=64), nullable=False),
        sa.Column("input", sa.JSON(), nullable=True),
        sa.Column("cron", sa.String(length=200), nullable=True),
        sa.Column("every", sa.String(length=32), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("catch_up", sa.String(length=8), nullable=False),
        sa.Column("max_concurrent", sa.Integer(), nullable=False),
        sa.Column("end_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("def_seq", sa.Integer(), nullable=True),
        sa.Column("last_fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_fire_seq", sa.Integer(), nullable=True),
        sa.Column("next_expected_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_schedules_user_id"), ["user_id"], unique=False)
    op.create_table(
        "schedule_fires",
        sa.Column("id", sa.String(length=160), nullable=False),
        sa.Column("schedule_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=True),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("schedule_fires", schema=None) as batch_op:
        batch_op.create_index("ix_schedule_fires_schedule_fired", ["schedule_id", "fired_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_schedule_fires_task_id"), ["task_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("schedule_fires", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_schedule_fires_task_id"))
        batch_op.drop_index("ix_schedule_fires_schedule_fired")
    op.drop_table("schedule_fires")
    with op.batch_alter_table("schedules", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_schedules_user_id"))
    op.drop_table("schedules")
