"""LTI 1.3: platforms, tool keys, launches' users, courses and links, score passbacks

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        # Existing assignments get the default policy; the model sets it on new rows.
        batch_op.add_column(sa.Column('score_policy', sa.Enum('best', 'latest', name='scorepolicy', native_enum=False, create_constraint=True, length=16), nullable=False, server_default='best'))
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.alter_column('score_policy', server_default=None)

    op.create_table('lti_tool_keys',
    sa.Column('kid', sa.String(length=64), nullable=False),
    sa.Column('private_key_pem', sa.Text(), nullable=False),
    sa.Column('retired_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_tool_keys')),
    sa.UniqueConstraint('kid', name=op.f('uq_lti_tool_keys_kid'))
    )
    op.create_table('lti_platforms',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('issuer', sa.String(length=255), nullable=False),
    sa.Column('client_id', sa.String(length=255), nullable=False),
    sa.Column('auth_login_url', sa.String(length=1024), nullable=False),
    sa.Column('access_token_url', sa.String(length=1024), nullable=False),
    sa.Column('jwks_url', sa.String(length=1024), nullable=False),
    sa.Column('token_audience', sa.String(length=1024), nullable=True),
    sa.Column('course_id', sa.Integer(), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_lti_platforms_course_id_courses'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_platforms')),
    sa.UniqueConstraint('issuer', 'client_id', name=op.f('uq_lti_platforms_issuer'))
    )
    op.create_table('lti_contexts',
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('context_id', sa.String(length=255), nullable=False),
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_lti_contexts_course_id_courses'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_contexts_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_contexts')),
    sa.UniqueConstraint('platform_id', 'context_id', name=op.f('uq_lti_contexts_platform_id'))
    )
    op.create_table('lti_deployments',
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('deployment_id', sa.String(length=255), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_deployments_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_deployments')),
    sa.UniqueConstraint('platform_id', 'deployment_id', name=op.f('uq_lti_deployments_platform_id'))
    )
    op.create_table('lti_login_states',
    sa.Column('state', sa.String(length=64), nullable=False),
    sa.Column('nonce', sa.String(length=64), nullable=False),
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('expires_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_login_states_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('state', name=op.f('pk_lti_login_states'))
    )
    with op.batch_alter_table('lti_login_states', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_login_states_expires_at'), ['expires_at'], unique=False)

    op.create_table('lti_users',
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('sub', sa.String(length=255), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_users_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_lti_users_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_users')),
    sa.UniqueConstraint('platform_id', 'sub', name=op.f('uq_lti_users_platform_id'))
    )
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_users_user_id'), ['user_id'], unique=False)

    op.create_table('lti_resource_links',
    sa.Column('platform_id', sa.Integer(), nullable=False),
    sa.Column('context_id', sa.Integer(), nullable=False),
    sa.Column('resource_link_id', sa.String(length=255), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=True),
    sa.Column('lineitem_url', sa.String(length=1024), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_lti_resource_links_assignment_id_assignments'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['context_id'], ['lti_contexts.id'], name=op.f('fk_lti_resource_links_context_id_lti_contexts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['platform_id'], ['lti_platforms.id'], name=op.f('fk_lti_resource_links_platform_id_lti_platforms'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_resource_links')),
    sa.UniqueConstraint('platform_id', 'resource_link_id', name=op.f('uq_lti_resource_links_platform_id'))
    )
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_lti_resource_links_assignment_id'), ['assignment_id'], unique=False)

    op.create_table('lti_score_passbacks',
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('lti_user_id', sa.Integer(), nullable=False),
    sa.Column('resource_link_id', sa.Integer(), nullable=False),
    sa.Column('lineitem_url', sa.String(length=1024), nullable=False),
    sa.Column('status', sa.Enum('pending', 'delivered', 'failed', 'superseded', name='passbackstatus', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('lease_token', sa.String(length=32), nullable=True),
    sa.Column('lease_expires_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('dispatched_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('score_given', sa.Double(), nullable=True),
    sa.Column('score_maximum', sa.Double(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('updated_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('delivered_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['lti_user_id'], ['lti_users.id'], name=op.f('fk_lti_score_passbacks_lti_user_id_lti_users'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['resource_link_id'], ['lti_resource_links.id'], name=op.f('fk_lti_score_passbacks_resource_link_id_lti_resource_links'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_lti_score_passbacks_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lti_score_passbacks'))
    )
    with op.batch_alter_table('lti_score_passbacks', schema=None) as batch_op:
        batch_op.create_index('ix_lti_score_passbacks_due', ['status', 'next_attempt_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_lti_score_passbacks_submission_id'), ['submission_id'], unique=False)
        batch_op.create_index('ix_lti_score_passbacks_target', ['lti_user_id', 'lineitem_url'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('lti_score_passbacks', schema=None) as batch_op:
        batch_op.drop_index('ix_lti_score_passbacks_target')
        batch_op.drop_index(batch_op.f('ix_lti_score_passbacks_submission_id'))
        batch_op.drop_index('ix_lti_score_passbacks_due')

    op.drop_table('lti_score_passbacks')
    with op.batch_alter_table('lti_resource_links', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_resource_links_assignment_id'))

    op.drop_table('lti_resource_links')
    with op.batch_alter_table('lti_users', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_users_user_id'))

    op.drop_table('lti_users')
    with op.batch_alter_table('lti_login_states', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_lti_login_states_expires_at'))

    op.drop_table('lti_login_states')
    op.drop_table('lti_deployments')
    op.drop_table('lti_contexts')
    op.drop_table('lti_platforms')
    op.drop_table('lti_tool_keys')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_column('score_policy')
