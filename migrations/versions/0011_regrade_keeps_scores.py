"""Regrades that keep the scores: a regrade run says whether it gave new feedback only, and a
score adjustment says which regrade wrote it (a kept score, or a kept score lifted)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('regrade_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('keep_scores', sa.Boolean(), server_default=sa.false(), nullable=False))
    with op.batch_alter_table('score_adjustments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('regrade_run_id', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_score_adjustments_regrade_run_id'), ['regrade_run_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_score_adjustments_regrade_run_id_regrade_runs'), 'regrade_runs', ['regrade_run_id'], ['id'], ondelete='SET NULL')


def downgrade() -> None:
    with op.batch_alter_table('score_adjustments', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_score_adjustments_regrade_run_id_regrade_runs'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_score_adjustments_regrade_run_id'))
        batch_op.drop_column('regrade_run_id')
    with op.batch_alter_table('regrade_runs', schema=None) as batch_op:
        batch_op.drop_column('keep_scores')
