"""LMS integration: observers, LMS identities, rosters (Names and Roles), line items, due dates

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

UTC = service.models.base.UTCDateTime(timezone=True)


def _course_roles(*values: str) -> sa.Enum:
    return sa.Enum(*values, name='courserole', native_enum=False, create_constraint=True,
                   length=16)


def upgrade() -> None:
    with op.batch_alter_table('enrolments', schema=None) as batch_op:
        batch_op.alter_column('role', existing_type=_course_roles('student', 'instructor'),
                              type_=_course_roles('student', 'instructor', 'observer'),
                              existing_nullable=False)

    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('name', sa.String(length=200), nullable=False,
                                      server_default=''))
        batch_op.add_column(sa.Column('email', sa.String(length=255), nullable=True))

    with op.batch_alter_table('lti_contexts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('title', sa.String(length=200), nullable=False,
                                      server_default=''))
        batch_op.add_column(sa.Column('memberships_url', sa.String(length=1024), nullable=True))
        batch_op.add_column(sa.Column('lineitems_url', sa.String(length=1024), nullable=True))
        batch_op.add_column(sa.Column('ags_scopes', sa.JSON(), nullable=False,
                                      server_default='[]'))
        batch_op.add_column(sa.Column('differences_url', sa.String(length=1024), nullable=True))
        batch_op.add_column(sa.Column('roster_synced_at', UTC, nullable=True))
        batch_op.add_column(sa.Column('roster_error', sa.Text(), nullable=True))

    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.add_column(sa.Column('title', sa.String(length=255), nullable=False,
                                      server_default=''))
        batch_op.add_column(sa.Column('lineitem_label', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('lineitem_score_maximum', sa.Double(), nullable=True))
        batch_op.add_column(sa.Column('lms_due_at', UTC, nullable=True))
        batch_op.add_column(sa.Column('lineitem_synced_at', UTC, nullable=True))
        batch_op.add_column(sa.Column('lineitem_error', sa.Text(), nullable=True))

    op.create_table('lti_memberships',
    sa.Column('context_id', sa.Integer(), nullable=False),
    sa.Column('lti_user_id', sa.Integer(), nullable=False),
    sa.Column('roles', sa.JSON(), nullable=False),
    sa.Column('role', _course_roles('student', 'instructor', 'observer'), nullable=False),
    sa.Column('status', sa.Enum('active', 'inactive', 'dropped', name='membershipstatus', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('seen_at', UTC, nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', UTC, nullable=False),
    sa.ForeignKeyConstraint(['context_id'], ['lti_contexts.id'], name=op.f('fk_lti_memberships_context_id_lti_contexts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['lti_user_id'], ['lti_users.id'], name=op.f('fk_lti_memberships_lti_user_id_lti_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_memberships')),
    sa.UniqueConstraint('context_id', 'lti_user_id', name=op.f('uq_lti_memberships_context_id'))
    )
    with op.batch_alter_table('lti_memberships', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_memberships_lti_user_id'), ['lti_user_id'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('lti_memberships', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_memberships_lti_user_id'))
    op.drop_table('lti_memberships')
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        for column in ('lineitem_error', 'lineitem_synced_at', 'lms_due_at',
                       'lineitem_score_maximum', 'lineitem_label', 'title'):
            batch_op.drop_column(column)
    with op.batch_alter_table('lti_contexts', schema=None) as batch_op:
        for column in ('roster_error', 'roster_synced_at', 'differences_url', 'ags_scopes',
                       'lineitems_url', 'memberships_url', 'title'):
            batch_op.drop_column(column)
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.drop_column('email')
        batch_op.drop_column('name')
    # Observers become students again before the constraint narrows.
    op.execute("UPDATE enrolments SET role = 'student' WHERE role = 'observer'")
    with op.batch_alter_table('enrolments', schema=None) as batch_op:
        batch_op.alter_column('role', existing_type=_course_roles('student', 'instructor',
                                                                  'observer'),
                              type_=_course_roles('student', 'instructor'),
                              existing_nullable=False)
