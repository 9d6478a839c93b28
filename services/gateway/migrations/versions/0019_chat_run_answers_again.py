"""chat_runs.answers_again: the run whose question a run answers again (a LangGraph run from
that question's checkpoint: a regenerated answer, on a branch of its own)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("answers_again", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.drop_column("answers_again")
