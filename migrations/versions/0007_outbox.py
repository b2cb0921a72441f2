"""Outbox: webhook deliveries and LMS score passbacks share one leased-delivery shape

Webhook deliveries gain the lease the score passbacks already had (a claim token and when it
is presumed lost) and the same unbounded ``last_error``; a passback's ``next_attempt_at`` may be
empty, as a webhook delivery's may. Every delivery is kept, in flight or not: a webhook
attempt in flight before the upgrade kept its delivery back through ``next_attempt_at``, which
the engine still honours; on the way down a live lease becomes that same wait again.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import service.models.base

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('lease_token', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('lease_expires_at',
                                      service.models.base.UTCDateTime(timezone=True),
                                      nullable=True))
        batch_op.alter_column('last_error', existing_type=sa.String(length=200),
                              type_=sa.Text(), existing_nullable=True)
    with op.batch_alter_table('lti_score_passbacks', schema=None) as batch_op:
        batch_op.alter_column('next_attempt_at',
                              existing_type=service.models.base.UTCDateTime(timezone=True),
                              nullable=True)


def downgrade() -> None:
    op.execute("UPDATE lti_score_passbacks SET next_attempt_at = COALESCE(updated_at, created_at)"
               " WHERE next_attempt_at IS NULL")
    with op.batch_alter_table('lti_score_passbacks', schema=None) as batch_op:
        batch_op.alter_column('next_attempt_at',
                              existing_type=service.models.base.UTCDateTime(timezone=True),
                              nullable=False)
    # Before 0007 an attempt in flight held its webhook delivery by a later next_attempt_at.
    op.execute("UPDATE webhook_deliveries SET next_attempt_at = lease_expires_at"
               " WHERE lease_token IS NOT NULL AND (next_attempt_at IS NULL"
               " OR next_attempt_at < lease_expires_at)")
    op.execute("UPDATE webhook_deliveries SET last_error = SUBSTR(last_error, 1, 200)"
               " WHERE LENGTH(last_error) > 200")
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.alter_column('last_error', existing_type=sa.Text(),
                              type_=sa.String(length=200), existing_nullable=True)
        batch_op.drop_column('lease_expires_at')
        batch_op.drop_column('lease_token')
