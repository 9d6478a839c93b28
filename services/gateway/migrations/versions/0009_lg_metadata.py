"""conversations.meta and chat_runs.meta: the metadata a LangGraph client gives a thread (matched
by `POST /lg/threads/search`) and a run

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("meta", sa.JSON(), nullable=True))
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("meta", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.drop_column("meta")
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("meta")
