"""lg_assistants, lg_assistant_versions: the assistants made through the LangGraph API (`POST
/lg/assistants`), each version as it was made

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lg_assistants",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("graph_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("context", sa.JSON(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("lg_assistants", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lg_assistants_user_id"), ["user_id"], unique=False)
    op.create_table(
        "lg_assistant_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assistant_id", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("graph_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("context", sa.JSON(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("assistant_id", "version", name="uq_lg_assistant_versions_version"),
    )
    with op.batch_alter_table("lg_assistant_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lg_assistant_versions_assistant_id"), ["assistant_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("lg_assistant_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lg_assistant_versions_assistant_id"))
    op.drop_table("lg_assistant_versions")
    with op.batch_alter_table("lg_assistants", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lg_assistants_user_id"))
    op.drop_table("lg_assistants")
