"""Careless and hostile input is one ``error:`` line and exit status 2, never a traceback
(issue: the smaller findings of the integrity probe)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import db_rows
from tests.conftest import run_cli
from tests.conftest import run_cli_here
from tuner.control.tickets import Ticket

pytestmark = pytest.mark.integration
LONG_PATH = "/tmp/" + "a" * 3000 + ".py:K"


def _one_error(proc, text: str) -> None:  # type: ignore[no-untyped-def]
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out and text in out, out


@pytest.mark.parametrize(("args", "text"), [
    (["tune", "matmul", "--shape", "M=１０２４,N=64,K=64"], "must be an integer"),
    (["tune", "matmul", "--shape", "M=1_024,N=64,K=64"], "must be an integer"),
    (["tune", "matmul", "--shape", f"M={'9' * 5000},N=1,K=1"], "5000 digits"),
    (["best", "matmul", "--shape", f"M={'9' * 5000},N=1,K=1", "--dtype", "fp16"],
     "5000 digits"),
    (["tune", LONG_PATH, "--shape", "N=1"], "(3008 chars)"),
    (["best", LONG_PATH, "--shape", "N=1", "--dtype", "fp32"], "(3008 chars)"),
    (["best", "recorded:Xgemm", "--shape", "4096x4096", "--dtype", "fp32"],
     "name each dimension, NAME=VALUE pairs"),
    (["tune", "replay", "--trials", "1"], "tuner tune replay --backend replay:<file>"),
    (["tune", "replay", "--backend", "replay:/dev/zero", "--trials", "1"],
     "not a regular file"),
    (["status", "9" * 30], "less than or equal to 2147483647"),
    (["cancel", "99999999999"], "less than or equal to 2147483647"),
    (["tune", "matmul", "--shape", "M=64,N=64,K=64", "--backend", "cuda:0", "--parallel", "2"],
     "would put 2 timers on it"),
    (["tune", "matmul", "--shape", "M=64,N=64,K=64", "--backend", "cuda", "--devices", "0,0"],
     "names a GPU twice"),
    (["status", "--db", "postgresql://tuner:s3cret@127.0.0.1:9/tuner"],
     "--db carries a password"),
])
def test_bad_input_is_one_line(cli_env, args, text):
    _one_error(run_cli_here(args, cli_env), text)


def test_a_malformed_export_serves_what_is_intact(cli_env, tmp_path):
    good = {"kernel": "matmul", "problem": {"M": 64, "N": 64, "K": 64}, "dtype": "fp16",
            "device_kind": "cpu", "config": {"BLOCK_M": 32}, "fraction": 0.5,
            "fingerprint": {}}
    bad = [{**good, "fingerprint": "oops"}, {**good, "problem": {"M": "x"}}, "nonsense",
           {**good, "fraction": "NaN"}]
    path = tmp_path / "best.json"
    path.write_text(json.dumps({"schema": 1, "exported_at": "", "source": "t",
                                "configs": [*bad, good], "defaults": {"matmul": 5}}))
    proc = run_cli(["best", "matmul", "--shape", "M=64,N=64,K=64", "--dtype", "fp16",
                    "--source", str(path), "--device-kind", "cpu"], cli_env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout) == {"BLOCK_M": 32}
    assert "5 malformed entries" in proc.stderr, proc.stderr


def test_ticket_ids_stay_within_the_id_columns():
    with pytest.raises(ValueError, match="from 1 to 2147483647"):
        Ticket.from_json({"mode": "bench", "ref": 2**63 - 1, "attempt": 1})
    with pytest.raises(ValueError, match="from 1 to 1000"):
        Ticket.from_json({"mode": "bench", "ref": 1, "attempt": 2**40})
    assert Ticket.from_json({"mode": "bench", "ref": 2**31 - 1, "attempt": 3}).ref == 2**31 - 1


def test_the_grid_stops_once_every_point_was_handed_out(cli_env):
    """Before, with trials left in the budget, the grid re-proposed points still in flight
    (or timed out) hundreds of times."""
    proc = run_cli(["tune", f"{FAULT_KERNEL}:HANG_RUN", "--shape", "N=1000", "--backend",
                    "interpret", "--sampler", "grid", "--trials", "10", "--parallel", "2",
                    "--compile-timeout", "60", "--run-timeout", "4", "--seed", "0"],
                   cli_env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = f"sqlite:///{Path(cli_env['TUNER_DATA_DIR']) / 'tuner.db'}"
    rows = db_rows(db, "SELECT config_hash, count(*) FROM tuner_trials WHERE duplicate_of IS "
                       "NULL GROUP BY config_hash")
    assert len(rows) == 6 and all(n == 1 for _, n in rows), rows  # each config measured once
    (repeats,) = db_rows(db, "SELECT count(*) FROM tuner_trials WHERE duplicate_of IS NOT NULL")
    assert repeats[0] <= 2, repeats


def test_parallel_gpu_timers_beyond_the_hosts_gpus_are_refused(cli_env):
    """A fake two-GPU host (``CUDA_VISIBLE_DEVICES``): three timers would share a GPU."""
    env = {**cli_env, "CUDA_VISIBLE_DEVICES": "0,1"}
    proc = run_cli(["tune", "matmul", "--shape", "M=64,N=64,K=64", "--dtype", "fp16",
                    "--backend", "cuda", "--parallel", "3"], env, timeout=120)
    _one_error(proc, "--parallel 3 needs 3 GPUs (one timer per GPU); this host shows 2")
    assert "starting" not in proc.stdout + proc.stderr  # refused before anything started


def test_a_database_url_is_read_from_the_file_tuner_db_url_file_names(cli_env, tmp_path):
    """A password never needs a command line or an environment variable: the URL sits in a
    file (a Docker secret, a mode-600 file)."""
    db = tmp_path / "from-file.db"
    url_file = tmp_path / "db-url"
    url_file.write_text(f"sqlite:///{db}\n")
    env = {**cli_env, "TUNER_DB_URL_FILE": str(url_file)}
    proc = run_cli(["tune", "matmul", "--shape", "M=64,N=64,K=64", "--dtype", "fp32",
                    "--trials", "1", "--backend", "model:h100-sxm", "--confirm-top", "0"], env,
                   timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert db_rows(f"sqlite:///{db}", "SELECT count(*) FROM tuner_jobs")[0][0] == 1
    _one_error(run_cli(["status"], {**cli_env, "TUNER_DB_URL_FILE": str(tmp_path / "nope")}),
               "TUNER_DB_URL_FILE: cannot read")
