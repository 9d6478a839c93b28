"""callback_deliveries.kind: whose end a completion callback reports — a task's (`task`), a chat
run's (`chat`) or a LangGraph run's (`lg`, the LangGraph run-webhook shape). A chat or `/lg`
run's delivery is keyed like a task's: `task_id` is the run's id (a run's id is its task's), and
`run` counts its ends (an `/lg` run that stopped at an approval and was resumed with a webhook of
its own ends again)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("callback_deliveries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=8), nullable=False, server_default="task"))


def downgrade() -> None:
    with op.batch_alter_table("callback_deliveries", schema=None) as batch_op:
        batch_op.drop_column("kind")
