"""workflow_versions: every save of a workflow (its DSL and canvas layout), so the editor lists,
diffs and restores earlier versions

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workflow_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workflow_id", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("dsl", sa.JSON(), nullable=True),
        sa.Column("layout", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("workflow_id", "version", name="uq_workflow_versions_workflow_version"),
    )
    with op.batch_alter_table("workflow_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workflow_versions_workflow_id"), ["workflow_id"], unique=False)
    # A workflow saved before versions existed starts its history with what it is now.
    op.execute(
        "INSERT INTO workflow_versions (workflow_id, version, name, dsl, created_by, created_at) "
        "SELECT id, 1, name, dsl, user_id, updated_at FROM workflows"
    )


def downgrade() -> None:
    with op.batch_alter_table("workflow_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflow_versions_workflow_id"))
    op.drop_table("workflow_versions")
