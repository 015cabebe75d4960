"""What people look at after a job: dashboard notes and charts, the HTML report rendered in
headless Chromium, and revalidation of the stored winners."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import optuna
import pytest
from optuna_dashboard._note import get_note_from_system_attrs

from tests.conftest import run_cli
from tuner.optuna.storage import OBJECTIVE_NAME

SHAPE = "M=64,N=48,K=40"
STUDY = "matmul/M64-N48-K40/fp16/cpu/job-1"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]


@pytest.fixture()
def tuned(cli_env, tmp_path):
    run_cli(["tune", "matmul", "--shape", SHAPE, "--dtype", "fp16", "--trials", "4",
             "--backend", "interpret", "--seed", "0"], cli_env, check=True)
    return f"sqlite:///{tmp_path / 'data' / 'tuner.db'}"


def test_studies_carry_a_note_and_a_roofline_chart(tuned, tmp_path):
    storage = optuna.storages.RDBStorage(tuned)
    study_id = storage.get_study_id_from_name(STUDY)
    attrs = storage.get_study_system_attrs(study_id)
    note = get_note_from_system_attrs(attrs, None)["body"]
    assert "**Best config**" in note and "of the roofline" in note and "Stopped:" in note
    # one trial, both numberings: the service's (CLI, tuner status) and the dashboard's
    study = optuna.load_study(study_name=STUDY, storage=tuned)
    numbers = re.search(r"tuner trial #(\d+), trial (\d+) in this list", note)
    assert numbers is not None, note
    shown = next(t for t in study.trials if t.number == int(numbers.group(2)))
    assert shown.user_attrs["tuner_number"] == int(numbers.group(1))
    artifacts = [json.loads(v) if isinstance(v, str) else v
                 for k, v in attrs.items() if k.startswith("artifacts:")]
    assert len(artifacts) == 1 and artifacts[0]["mimetype"] == "image/png"
    stored = tmp_path / "data" / "artifacts" / artifacts[0]["artifact_id"]
    assert stored.read_bytes()[:4] == b"\x89PNG"
    assert optuna.load_study(study_name=STUDY, storage=tuned).metric_names == [OBJECTIVE_NAME]


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs "
                                             "Debian's chromium package)")
def test_report_renders_in_headless_chromium(tuned, cli_env, tmp_path):
    out = tmp_path / "report"
    profile = tmp_path / "profile.json"
    run_cli(["profile", "examples/mlp_block.py", "--out", str(profile), "--json"], cli_env,
            check=True)
    run_cli(["report", "1", "--out", str(out), "--profile", str(profile)], cli_env, check=True)
    page = out / "report.html"
    assert {p.name for p in out.iterdir()} >= {"report.html", "roofline.png", "history.png",
                                               "profile_roofline.png"}
    assert CHROMIUM is not None
    common = [CHROMIUM, *CHROME_FLAGS, f"--user-data-dir={tmp_path / 'chrome'}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout
    for element in ('id="best-configs"', 'id="roofline"', 'id="history"', 'id="failures"',
                    'id="profile"'):
        assert element in dom
    assert "BLOCK_M=" in dom and "<td>ok</td>" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([*common, "--window-size=1200,1600", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120, check=True)
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 1600 and pixels.std() > 0.05  # not a blank page


def test_revalidate_re_measures_the_stored_winner(tuned, cli_env):
    proc = run_cli(["revalidate", "--json"], cli_env)
    assert proc.returncode in (0, 1), proc.stderr  # 1: a regression beyond noise was seen
    (row,) = json.loads(proc.stdout)
    assert row["kernel"] == "matmul" and row["device_kind"] == "cpu"
    assert row["new_ms"] > 0 and row["noise"] >= 0.05
    assert row["verdict"] in ("same", "regressed", "improved")
    assert (row["verdict"] == "regressed") == (proc.returncode == 1)
    assert row["change"] == pytest.approx(row["new_ms"] / row["stored_ms"] - 1)


@pytest.mark.parametrize("args", [["report", "1"], ["revalidate"]])
def test_without_a_database_is_one_line(cli_env, tmp_path, args):
    proc = run_cli(args, cli_env)
    assert proc.returncode == 2 and "no database" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "data").exists()  # and nothing was created


def test_report_of_an_unknown_job_is_one_line(tuned, cli_env):
    proc = run_cli(["report", "99"], cli_env)
    assert proc.returncode == 2 and "no job 99" in proc.stderr and "Traceback" not in proc.stderr
