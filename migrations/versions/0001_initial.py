"""accounts, courses, assignments, submissions, results

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('courses',
    sa.Column('code', sa.String(length=64), nullable=False),
    sa.Column('title', sa.String(length=200), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_courses')),
    sa.UniqueConstraint('code', name=op.f('uq_courses_code'))
    )
    op.create_table('users',
    sa.Column('username', sa.String(length=64), nullable=False),
    sa.Column('display_name', sa.String(length=128), nullable=False),
    sa.Column('role', sa.Enum('student', 'instructor', 'admin', name='role', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users')),
    sa.UniqueConstraint('username', name=op.f('uq_users_username'))
    )
    op.create_table('api_tokens',
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('prefix', sa.String(length=12), nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('expires_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_used_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_api_tokens_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_user_id'), ['user_id'], unique=False)

    op.create_table('assignments',
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('slug', sa.String(length=64), nullable=False),
    sa.Column('title', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('max_score', sa.Double(), nullable=False),
    sa.Column('due_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('late_policy', sa.Enum('accept', 'penalty', 'reject', name='latepolicy', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('late_penalty_per_day', sa.Double(), nullable=False),
    sa.Column('rate_limit_count', sa.Integer(), nullable=True),
    sa.Column('rate_limit_window_seconds', sa.Integer(), nullable=True),
    sa.Column('published', sa.Boolean(), nullable=False),
    sa.Column('results_published', sa.Boolean(), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_assignments_course_id_courses'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assignments')),
    sa.UniqueConstraint('course_id', 'slug', name=op.f('uq_assignments_course_id'))
    )
    op.create_table('enrolments',
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('role', sa.Enum('student', 'instructor', name='courserole', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_enrolments_course_id_courses'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_enrolments_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_enrolments')),
    sa.UniqueConstraint('course_id', 'user_id', name=op.f('uq_enrolments_course_id'))
    )
    with op.batch_alter_table('enrolments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_enrolments_user_id'), ['user_id'], unique=False)

    op.create_table('assignment_versions',
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=64), nullable=False),
    sa.Column('max_score', sa.Double(), nullable=False),
    sa.Column('checks', sa.JSON(), nullable=False),
    sa.Column('synced_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_assignment_versions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assignment_versions')),
    sa.UniqueConstraint('assignment_id', 'version', name=op.f('uq_assignment_versions_assignment_id'))
    )
    op.create_table('submissions',
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('assignment_version', sa.String(length=64), nullable=False),
    sa.Column('status', sa.Enum('queued', 'running', 'graded', 'failed', name='submissionstatus', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('attempt_token', sa.String(length=32), nullable=True),
    sa.Column('claimed_by', sa.String(length=128), nullable=True),
    sa.Column('lease_expires_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('late', sa.Boolean(), nullable=False),
    sa.Column('message', sa.Text(), nullable=True),
    sa.Column('requested_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('enqueued_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('started_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('graded_at', service.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_submissions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_submissions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_submissions'))
    )
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.create_index('ix_submissions_owner', ['assignment_id', 'user_id', 'requested_at'], unique=False)
        batch_op.create_index('ix_submissions_status', ['status'], unique=False)

    op.create_table('results',
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('round', sa.Integer(), nullable=False),
    sa.Column('score', sa.Double(), nullable=False),
    sa.Column('final_score', sa.Double(), nullable=False),
    sa.Column('max_score', sa.Double(), nullable=False),
    sa.Column('codes', sa.JSON(), nullable=False),
    sa.Column('document', sa.JSON(), nullable=False),
    sa.Column('attempt_token', sa.String(length=32), nullable=False),
    sa.Column('created_at', service.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_results_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_results')),
    sa.UniqueConstraint('submission_id', 'round', name=op.f('uq_results_submission_id'))
    )
    op.create_table('submission_files',
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('content', sa.LargeBinary(), nullable=False),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_submission_files_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_submission_files')),
    sa.UniqueConstraint('submission_id', 'name', name=op.f('uq_submission_files_submission_id'))
    )


def downgrade() -> None:
    op.drop_table('submission_files')
    op.drop_table('results')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_index('ix_submissions_status')
        batch_op.drop_index('ix_submissions_owner')

    op.drop_table('submissions')
    op.drop_table('assignment_versions')
    with op.batch_alter_table('enrolments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_enrolments_user_id'))

    op.drop_table('enrolments')
    op.drop_table('assignments')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_user_id'))

    op.drop_table('api_tokens')
    op.drop_table('users')
    op.drop_table('courses')
