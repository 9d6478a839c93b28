"""mcp_servers: a transport per server (`http`, the legacy `sse`, or `stdio`) and what a stdio
server is started with (command, args, network, readable paths, memory limit); whether a
server's sampling requests are answered

Revision ID: 0012
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mcp_servers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("transport", sa.String(length=10), nullable=False, server_default="http"))
        batch_op.add_column(sa.Column("command", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("args", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("network", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("read_paths", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("memory_mb", sa.Integer(), nullable=False, server_default="1024"))
        batch_op.add_column(sa.Column("sampling", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("mcp_servers", schema=None) as batch_op:
        for column in ("sampling", "memory_mb", "read_paths", "network", "args", "command", "transport"):
            batch_op.drop_column(column)
