"""chat_runs.multitask: the policy a run was posted with toward a run still going (the LangGraph
facade's `multitask_strategy`)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        # Runs posted before this revision were all taken as `enqueue` unless they said otherwise,
        # and what they said was not kept: `enqueue` is the truthful default for them.
        batch_op.add_column(sa.Column("multitask", sa.String(length=16), nullable=False, server_default="enqueue"))


def downgrade() -> None:
    with op.batch_alter_table("chat_runs", schema=None) as batch_op:
        batch_op.drop_column("multitask")
