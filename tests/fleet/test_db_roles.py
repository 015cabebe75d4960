"""The compose file's database roles, on a real PostgreSQL: the same init script, then the
migration as the owner role and a whole tuning job as the row-only service role."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.conftest import ROOT
from tests.conftest import run_cli
from tuner.testing.services import pg_bin

pytestmark = pytest.mark.integration


def test_migrate_as_owner_then_tune_as_the_service_role_which_cannot_change_the_schema(
        postgres, cli_env, tmp_path):
    name = f"roles_{os.getpid()}"
    admin_url = postgres.create_database(name)
    env = {**os.environ, "POSTGRES_USER": "postgres", "POSTGRES_DB": name,
           "PGHOST": "127.0.0.1", "PGPORT": str(postgres.port),
           "TUNER_MIGRATE_PASSWORD": "m-pass", "TUNER_SERVICE_PASSWORD": "s-pass",
           "PATH": f"{Path(pg_bin('psql')).parent}:{os.environ.get('PATH', '')}"}
    subprocess.run(["sh", str(ROOT / "db" / "postgres" / "init-roles.sh")], env=env,
                   check=True, capture_output=True, timeout=60)
    base = admin_url.split("@", 1)[1]
    migrate_url = f"postgresql+psycopg://tuner_migrate:m-pass@{base}"
    service_url = f"postgresql+psycopg://tuner_service:s-pass@{base}"
    # URLs with passwords come from the environment or a file, never a command line
    run_cli(["db", "upgrade"], {**cli_env, "TUNER_DB_URL": migrate_url}, check=True)
    url_file = tmp_path / "service-url"
    url_file.write_text(service_url + "\n")
    out = run_cli(["tune", "matmul", "--shape", "M=32,N=32,K=32", "--dtype", "fp32",
                   "--trials", "2", "--backend", "interpret", "--rep-ms", "5",
                   "--confirm-top", "0"], {**cli_env, "TUNER_DB_URL_FILE": str(url_file)},
                  check=True)
    assert "best config:" in out.stdout
    engine = sa.create_engine(service_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM tuner_trials")).scalar() == 2
            for ddl in ("DROP TABLE tuner_trials", "CREATE TABLE evil (x int)",
                        "ALTER TABLE tuner_jobs ADD COLUMN evil int"):
                with pytest.raises(sa.exc.ProgrammingError, match=r"permission denied|must be"):
                    conn.execute(sa.text(ddl))
                conn.rollback()
    finally:
        engine.dispose()
