"""messages.client_id: the id a LangGraph client gave a message (a UI keys its messages by it),
kept beside the row's own id, which orders a turn's messages as they were said

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("client_id", sa.String(length=64), nullable=True))
        batch_op.create_index("ix_messages_conversation_client", ["conversation_id", "client_id"])


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_conversation_client")
        batch_op.drop_column("client_id")
