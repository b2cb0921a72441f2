"""Web sessions the server ends: when and why a session ended (logout, a password change, an
administrator), and its last request (sessions end after a while without one)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('last_seen_at', service.models.base.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('ended_at', service.models.base.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('ended_by', sa.Enum('logout', 'password', 'admin', name='sessionend', native_enum=False, create_constraint=True, length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.drop_column('ended_by')
        batch_op.drop_column('ended_at')
        batch_op.drop_column('last_seen_at')
