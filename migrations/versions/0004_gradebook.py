"""Gradebook: extensions, score adjustments, comments, regrade runs, the due date's time zone

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

UTC_DATETIME = service.models.base.UTCDateTime(timezone=True)


def _id_and_created() -> list[sa.Column]:  # type: ignore[type-arg]
    return [sa.Column('id', sa.Integer(), nullable=False),
            sa.Column('created_at', UTC_DATETIME, nullable=False)]


def upgrade() -> None:
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('time_zone', sa.String(length=64), nullable=False,
                                      server_default='UTC'))
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.alter_column('time_zone', server_default=None)

    op.create_table('extensions',
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=True),
    sa.Column('due_at', UTC_DATETIME, nullable=True),
    sa.Column('extra_days', sa.Integer(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('granted_by_id', sa.Integer(), nullable=True),
    *_id_and_created(),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_extensions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_extensions_course_id_courses'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['granted_by_id'], ['users.id'], name=op.f('fk_extensions_granted_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_extensions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_extensions'))
    )
    op.create_index('ix_extensions_student', 'extensions', ['course_id', 'user_id'], unique=False)

    op.create_table('score_adjustments',
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('old_score', sa.Double(), nullable=True),
    sa.Column('new_score', sa.Double(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('by_id', sa.Integer(), nullable=True),
    *_id_and_created(),
    sa.ForeignKeyConstraint(['by_id'], ['users.id'], name=op.f('fk_score_adjustments_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_score_adjustments_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_score_adjustments'))
    )
    op.create_index(op.f('ix_score_adjustments_submission_id'), 'score_adjustments', ['submission_id'], unique=False)

    op.create_table('submission_comments',
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('author_id', sa.Integer(), nullable=True),
    sa.Column('body', sa.Text(), nullable=False),
    *_id_and_created(),
    sa.ForeignKeyConstraint(['author_id'], ['users.id'], name=op.f('fk_submission_comments_author_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_submission_comments_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_submission_comments'))
    )
    op.create_index(op.f('ix_submission_comments_submission_id'), 'submission_comments', ['submission_id'], unique=False)

    op.create_table('regrade_runs',
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('scope', sa.String(length=16), nullable=False),
    sa.Column('started_by_id', sa.Integer(), nullable=True),
    sa.Column('before', sa.JSON(), nullable=False),
    *_id_and_created(),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_regrade_runs_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['started_by_id'], ['users.id'], name=op.f('fk_regrade_runs_started_by_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_regrade_runs'))
    )
    op.create_index(op.f('ix_regrade_runs_assignment_id'), 'regrade_runs', ['assignment_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_regrade_runs_assignment_id'), table_name='regrade_runs')
    op.drop_table('regrade_runs')
    op.drop_index(op.f('ix_submission_comments_submission_id'), table_name='submission_comments')
    op.drop_table('submission_comments')
    op.drop_index(op.f('ix_score_adjustments_submission_id'), table_name='score_adjustments')
    op.drop_table('score_adjustments')
    op.drop_index('ix_extensions_student', table_name='extensions')
    op.drop_table('extensions')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_column('time_zone')
