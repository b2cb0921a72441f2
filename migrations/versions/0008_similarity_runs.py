"""Similarity runs: the similarity report is computed in the background, with its progress

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

UTC_DATETIME = service.models.base.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table('similarity_runs',
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('requested_by_id', sa.Integer(), nullable=True),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('status', sa.Enum('queued', 'running', 'done', 'failed', name='reportstatus', native_enum=False, create_constraint=True, length=16), nullable=False),
    sa.Column('done', sa.Integer(), nullable=False),
    sa.Column('total', sa.Integer(), nullable=False),
    sa.Column('updated_at', UTC_DATETIME, nullable=False),
    sa.Column('finished_at', UTC_DATETIME, nullable=True),
    sa.Column('report', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', UTC_DATETIME, nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_similarity_runs_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['requested_by_id'], ['users.id'], name=op.f('fk_similarity_runs_requested_by_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_similarity_runs'))
    )
    op.create_index(op.f('ix_similarity_runs_assignment_id'), 'similarity_runs', ['assignment_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_similarity_runs_assignment_id'), table_name='similarity_runs')
    op.drop_table('similarity_runs')
