"""LTI roster drops: every drop a roster sync made or would make, held or undone; when a member
last launched or was kept by an instructor

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('lti_roster_drops',
    sa.Column('context_id', sa.Integer(), nullable=False),
    sa.Column('membership_id', sa.Integer(), nullable=False),
    sa.Column('becomes', sa.Enum('active', 'inactive', 'dropped', name='membershipstatus', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('role', sa.Enum('student', 'instructor', 'observer', name='courserole', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=False),
    sa.Column('state', sa.Enum('held', 'done', 'dismissed', 'undone', name='dropstate', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('decided_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('decided_by_id', sa.Integer(), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['context_id'], ['lti_contexts.id'], name=op.f('fk_lti_roster_drops_context_id_lti_contexts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['decided_by_id'], ['users.id'], name=op.f('fk_lti_roster_drops_decided_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['membership_id'], ['lti_memberships.id'], name=op.f('fk_lti_roster_drops_membership_id_lti_memberships'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_roster_drops'))
    )
    with op.batch_alter_table('lti_roster_drops', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_roster_drops_context_id'), ['context_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_lti_roster_drops_membership_id'), ['membership_id'], unique=False)

    with op.batch_alter_table('lti_memberships', schema=None) as batch_op:
        batch_op.add_column(sa.Column('launched_at', service.models.base.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('kept_at', service.models.base.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('lti_memberships', schema=None) as batch_op:
        batch_op.drop_column('kept_at')
        batch_op.drop_column('launched_at')

    with op.batch_alter_table('lti_roster_drops', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_roster_drops_membership_id'))
        batch_op.drop_index(batch_op.f('ix_lti_roster_drops_context_id'))

    op.drop_table('lti_roster_drops')
