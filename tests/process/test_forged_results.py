"""Nothing a kernel module reports can forge the table production reads: a file kernel that
calls itself ``matmul`` is stored under its own identity, never over the built-in, and a
fraction of the roofline it cannot have (infinite, or far above 1) is flagged and never offered;
the export stays strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.conftest import db_rows
from tests.conftest import run_cli

pytestmark = pytest.mark.integration
FORGER = ROOT / "tests" / "kernels" / "forger_kernel.py"
SHAPE = ["--shape", "M=64,N=64,K=64", "--dtype", "fp16"]


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_kernel_named_matmul_cannot_take_over_the_builtins_best_config(cli_env, tmp_path):
    run_cli(["tune", "matmul", *SHAPE, "--trials", "3", "--seed", "0", "--confirm-top", "0"],
            cli_env, check=True)
    builtin = json.loads(run_cli(["best", "matmul", *SHAPE], cli_env, check=True).stdout)
    infinite = run_cli(["tune", "--kernel", f"{FORGER}:INFINITE", *SHAPE, "--trials", "2",
                        "--confirm-top", "0"], cli_env)
    assert infinite.returncode == 1 and "could be scored" in infinite.stdout, infinite.stdout
    inflated = run_cli(["tune", "--kernel", f"{FORGER}:INFLATED", *SHAPE, "--trials", "2",
                        "--confirm-top", "0"], cli_env, check=True)
    assert "IMPLAUSIBLE" in inflated.stdout, inflated.stdout
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    rows = db_rows(db, "SELECT kernel, kernel_identity FROM tuner_best_configs")
    assert rows == [("matmul", "builtin")], rows  # neither forger was offered at all
    trials = db_rows(db, "SELECT t.score_basis, t.fraction FROM tuner_trials t JOIN tuner_jobs "
                         "j ON j.id = t.job_id WHERE j.kernel_identity != 'builtin'")
    bases = sorted({t.score_basis for t in trials})
    assert bases == ["implausible", "unscored"], trials
    served = run_cli(["best", "matmul", *SHAPE], cli_env, check=True)
    assert json.loads(served.stdout) == builtin and "tier exact" in served.stderr
    out = tmp_path / "best.json"
    run_cli(["export", "--out", str(out)], cli_env, check=True)
    document = _strict(out.read_text())
    assert [(e["kernel"], e["identity"]) for e in document["configs"]] == [  # type: ignore[index]
        ("matmul", "builtin")]


def test_a_file_kernel_of_a_builtin_name_keeps_its_own_entry(cli_env):
    """The same name, two kernels: each is stored and served its own, by identity."""
    run_cli(["tune", "--kernel", "matmul", *SHAPE, "--trials", "3", "--seed", "0",
             "--confirm-top", "0"], cli_env, check=True)
    proc = run_cli(["best", f"{FORGER}:HONEST", *SHAPE], cli_env)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the built-in's is not its own
    run_cli(["tune", "--kernel", f"{FORGER}:HONEST", *SHAPE, "--trials", "3", "--seed", "1",
             "--confirm-top", "0"], cli_env, check=True)
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    rows = db_rows(db, "SELECT kernel_identity, config FROM tuner_best_configs ORDER BY id")
    assert [r[0].split(":")[0] for r in rows] == ["builtin", "file"], rows
    for ref, (_, config) in zip(("matmul", f"{FORGER}:HONEST"), rows, strict=True):
        served = run_cli(["best", ref, *SHAPE], cli_env, check=True)
        stored = json.loads(config) if isinstance(config, str) else config
        assert json.loads(served.stdout) == stored, (ref, served.stdout)
