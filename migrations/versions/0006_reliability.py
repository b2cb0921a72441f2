"""Reliability: infrastructure interruptions counted apart from attempts; server-side web sessions

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('interruptions', sa.Integer(), nullable=False,
                                      server_default='0'))
        batch_op.add_column(sa.Column('workers_lost', sa.Integer(), nullable=False,
                                      server_default='0'))
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.alter_column('interruptions', server_default=None)
        batch_op.alter_column('workers_lost', server_default=None)

    op.create_table('web_sessions',
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('expires_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_web_sessions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_web_sessions')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_web_sessions_key_hash'))
    )
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_web_sessions_user_id'), ['user_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('web_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_web_sessions_user_id'))
    op.drop_table('web_sessions')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_column('workers_lost')
        batch_op.drop_column('interruptions')
