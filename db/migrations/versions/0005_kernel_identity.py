"""kernel identity: best configs keyed by whose code it is, not only by a chosen name

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 20:00:00
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None

OLD_UNIQUE_PG = 'tuner_best_configs_kernel_problem_hash_dtype_device_kind_key'
NAMING = {"uq": "uq_%(table_name)s_%(column_0_name)s"}


def _identity(spec: object, source_hash: str) -> str:
    """Jobs of a file (``path.py:NAME``) are ``file:<hash>``; every other one was built in."""
    data = json.loads(spec) if isinstance(spec, str) else (spec or {})
    ref = str(data.get("kernel", "")) if isinstance(data, dict) else ""
    is_file = ":" in ref and ref.split(":", 1)[0].endswith(".py")
    return f"file:{source_hash[:32]}" if is_file else "builtin"


def upgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table('tuner_jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kernel_identity', sa.String(length=128), nullable=True))
    jobs = bind.execute(sa.text("SELECT id, spec, kernel_source_hash FROM tuner_jobs")).all()
    for job_id, spec, source_hash in jobs:
        bind.execute(sa.text("UPDATE tuner_jobs SET kernel_identity = :i WHERE id = :id"),
                     {"i": _identity(spec, source_hash or ""), "id": job_id})
    if bind.dialect.name == 'postgresql':
        op.drop_constraint(OLD_UNIQUE_PG, 'tuner_best_configs', type_='unique')
    with op.batch_alter_table('tuner_best_configs', schema=None,
                              naming_convention=NAMING) as batch_op:
        if bind.dialect.name != 'postgresql':
            batch_op.drop_constraint('uq_tuner_best_configs_kernel', type_='unique')
        batch_op.add_column(sa.Column('kernel_identity', sa.String(length=128), nullable=False,
                                      server_default='builtin'))
    bind.execute(sa.text(
        "UPDATE tuner_best_configs SET kernel_identity = (SELECT j.kernel_identity FROM "
        "tuner_jobs j WHERE j.id = tuner_best_configs.job_id)"))
    with op.batch_alter_table('tuner_best_configs', schema=None) as batch_op:
        batch_op.create_unique_constraint('uq_best_config_key', [
            'kernel', 'kernel_identity', 'problem_hash', 'dtype', 'device_kind'])


def downgrade() -> None:
    with op.batch_alter_table('tuner_best_configs', schema=None) as batch_op:
        batch_op.drop_constraint('uq_best_config_key', type_='unique')
        batch_op.drop_column('kernel_identity')
        batch_op.create_unique_constraint(None, ['kernel', 'problem_hash', 'dtype',
                                                 'device_kind'])
    with op.batch_alter_table('tuner_jobs', schema=None) as batch_op:
        batch_op.drop_column('kernel_identity')
