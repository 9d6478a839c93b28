"""chat_runs.follows: the checkpoint (run) a run goes on from when it is not the run before it,
so a thread can branch (a LangGraph run or state update from an older checkpoint)

Revision ID: 0015
Revises: 0013
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("follows", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.drop_column("follows")
