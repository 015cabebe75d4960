"""A problem whose configs all fail the same way stops early, shows the failure once and makes
`tuner tune` exit non-zero; an interpreter limitation is one line that says what still works."""

from __future__ import annotations

import sqlalchemy as sa

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT
from tests.conftest import run_cli
from tuner.control.failures import SAME_FAILURE_STOP
from tuner.control.failures import FailureStreak
from tuner.control.failures import dominant_failure
from tuner.control.failures import signature

LIBDEVICE_KERNEL = str(ROOT / "tests" / "kernels" / "interpreter_limit_kernel.py")


def test_signatures_mask_what_varies_between_configs():
    a = signature("wrong_result", "[run] relative Frobenius error 3.1e-01 exceeds 1e-05\ntb")
    b = signature("wrong_result", "relative Frobenius error 2.7e+00 exceeds 1e-05")
    assert a == b == "wrong_result: relative Frobenius error # exceeds #"
    assert signature("timeout", "run exceeded 4 s") != a
    streak = FailureStreak()
    for i in range(SAME_FAILURE_STOP - 1):
        streak.add("compile_error", f"at {i}:4: BLOCK must be a power of 2")
        streak.add("lost", "worker vanished")  # says nothing about the kernel
    assert streak.stop_reason(any_success=False) is None
    streak.add("compile_error", "at 99:4: BLOCK must be a power of 2")
    reason = streak.stop_reason(any_success=False)
    assert reason is not None and f"same failure on {SAME_FAILURE_STOP} configs" in reason
    assert streak.stop_reason(any_success=True) is None
    streak.add("ok", None)
    assert streak.count == 0
    assert dominant_failure([("timeout", "x 1"), ("ok", None), ("timeout", "x 2"),
                             ("crashed", "y")]) == ("timeout: x 1", 2, 3)


def _tune(ref: str, trials: int, env: dict[str, str]) -> tuple[int, str]:
    proc = run_cli(["tune", ref, "--shape", "N=1000", "--backend", "interpret", "--trials",
                    str(trials), "--seed", "0"], env, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


def test_the_same_compile_error_stops_the_problem(cli_env, tmp_path):
    returncode, out = _tune(f"{FAULT_KERNEL}:ALWAYS_BROKEN", 50, cli_env)
    assert returncode == 1, out
    assert f"the same failure on {SAME_FAILURE_STOP} configs in a row, none passed" in out
    assert f"no config succeeded; {SAME_FAILURE_STOP} of {SAME_FAILURE_STOP} failed with " \
           "compile_error" in out
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'tuner.db'}")
    with engine.connect() as conn:
        measured = conn.execute(sa.text("SELECT measured FROM tuner_problems")).scalar_one()
    assert measured == SAME_FAILURE_STOP  # 7 valid configs, 50 trials: it stopped early


def test_an_interpreter_limit_is_one_line_that_says_what_still_works(cli_env, tmp_path):
    returncode, out = _tune(f"{LIBDEVICE_KERNEL}:ERFCINV", 10, cli_env)
    assert returncode == 1, out
    assert "the Triton interpreter has no libdevice.erfcinv" in out, out
    assert "interpreter_limit_kernel.py:" in out and "--static-check" in out
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'data' / 'tuner.db'}")
    with engine.connect() as conn:
        errors = conn.execute(sa.text("SELECT error FROM tuner_trials")).scalars().all()
    assert errors and all("\n" not in e and "InterpreterError" not in e for e in errors)
