"""A job whose configs fail in every way still finishes, with every other trial intact.

Each kernel's space is {ok, one fault} x 3 block sizes; the grid sampler measures all 6 configs,
two at a time, through `tuner tune` with real bench processes. Only the stage a hang case hangs
in gets the short 4 s limit; every other stage gets a generous one, so a compile slowed by a loaded
machine is never mistaken for the fault under test.
"""

from __future__ import annotations

import optuna
import pytest
import sqlalchemy as sa

from tests.conftest import FAULT_KERNEL
from tests.conftest import run_cli

HANG_S = 4
GENEROUS_S = 60
CASES = [
    ("COMPILE_ERROR", "compile_error", "power of 2"),
    ("OUT_OF_RESOURCES", "out_of_resources", "shared memory"),
    ("WRONG_RESULT", "wrong_result", "tolerance"),
    ("EXIT", "crashed", "exited with code 7"),
    ("SIGNAL", "crashed", "killed by SIGSEGV"),
    ("HANG_COMPILE", "timeout", "compile exceeded 4 s"),
    ("HANG_RUN", "timeout", "run exceeded 4 s"),
]


@pytest.mark.parametrize(("kernel", "status", "text"), CASES)
def test_job_finishes_with_each_failure_recorded(cli_env, tmp_path, kernel, status, text):
    proc = run_cli(["tune", f"{FAULT_KERNEL}:{kernel}", "--shape", "N=1000", "--backend",
                    "interpret", "--sampler", "grid", "--trials", "6", "--parallel", "2",
                    "--compile-timeout", str(HANG_S if kernel == "HANG_COMPILE" else GENEROUS_S),
                    "--run-timeout", str(HANG_S if kernel == "HANG_RUN" else GENEROUS_S),
                    "--seed", "0"],
                   cli_env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db_url = f"sqlite:///{tmp_path / 'data' / 'tuner.db'}"
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        job = conn.execute(sa.text("SELECT status FROM tuner_jobs")).one()
        trials = conn.execute(sa.text(
            "SELECT config, status, error, fraction, told FROM tuner_trials")).all()
    assert job.status == "completed"
    assert len(trials) == 6 and all(t.told for t in trials)
    faulty = [t for t in trials if '"ok"' not in t.config]
    healthy = [t for t in trials if '"ok"' in t.config]
    assert [t.status for t in faulty] == [status] * 3
    assert all(text in t.error for t in faulty), [t.error for t in faulty]
    assert [t.status for t in healthy] == ["ok"] * 3
    assert all(t.fraction is not None and t.fraction > 0 for t in healthy)

    (name,) = optuna.get_all_study_names(db_url)
    assert name.endswith("/N1000/fp32/cpu/job-1")
    study = optuna.load_study(study_name=name, storage=db_url)
    states = sorted(t.state.name for t in study.trials)
    assert states == ["COMPLETE"] * 3 + ["FAIL"] * 3
    assert {t.user_attrs["status"] for t in study.trials
            if t.state.name == "FAIL"} == {status}
