"""mcp_servers: external MCP servers whose tools the bridge serves

Revision ID: 0003_mcp_servers
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_mcp_servers"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("url", sa.String(length=1000), nullable=False),
        sa.Column("headers_enc", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("allow_tools", sa.JSON(), nullable=True),
        sa.Column("deny_tools", sa.JSON(), nullable=True),
        sa.Column("high_risk_tools", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uq_mcp_servers_name"),
    )


def downgrade() -> None:
    op.drop_table("mcp_servers")
