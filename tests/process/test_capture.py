"""Library kernels tuned in place, with real processes and real Triton kernels (interpreter):
``tuner capture`` runs a program whose launchers choose their own meta-parameters,
``tuner tune --captured`` tunes what it recorded, and ``tuner.patch()`` makes the program's
own launches use the tuned configs (its own correctness asserts still pass)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.conftest import run_cli

PROGRAM = ROOT / "tests" / "kernels" / "captured_program.py"
PATCHED = ("import logging, runpy, sys; logging.basicConfig(level=logging.INFO); import tuner; "
           "print('patch on:', tuner.patch()); runpy.run_path(sys.argv[1], run_name='__main__')")


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One capture of the program and one tuning of every captured problem, shared."""
    folder = tmp_path_factory.mktemp("capture")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
    env.update(TUNER_DATA_DIR=str(folder / "data"), TRITON_INTERPRET="1", COLUMNS="200",
               TUNER_KERNEL_ROOTS=os.pathsep.join([str(ROOT), str(folder)]))
    out = folder / "capture.json"
    cap = run_cli(["capture", "-o", str(out), "--", sys.executable, str(PROGRAM)], env)
    db = f"sqlite:///{folder / 'tuned.db'}"
    tuned = run_cli(["tune", "--captured", str(out), "--min-share", "0", "--trials", "2",
                     "--backend", "interpret", "--db", db], env)
    return {"env": env, "out": out, "capture": cap, "tune": tuned, "db": db,
            "db_path": folder / "tuned.db"}


def _kernels(captured: dict[str, Any]) -> dict[str, Any]:
    return {k["name"]: k for k in json.loads(captured["out"].read_text())["kernels"]}


def test_capture_records_what_each_launcher_chose(captured):
    assert captured["capture"].returncode == 0, captured["capture"].stderr
    kernels = _kernels(captured)
    assert set(kernels) == {"_scale_rows_kernel", "_add_kernel", "_gather_rows_kernel"}
    scale = {json.dumps(x["problem"], sort_keys=True): x
             for x in kernels["_scale_rows_kernel"]["launches"]}
    rows16 = scale[json.dumps({"X_0": 16, "X_1": 100, "Y_0": 16, "Y_1": 100, "stride": 100,
                               "n_cols": 100}, sort_keys=True)]
    assert (rows16["meta"], rows16["num_warps"], rows16["grid"], rows16["calls"]) == \
        ({"BLOCK_SIZE": 128}, 4, [16], 3)
    assert rows16["written"] == ["Y"]  # X is read only
    gather = kernels["_gather_rows_kernel"]["launches"][0]
    idx = next(a for a in gather["args"] if a["name"] == "IDX")
    assert idx["values"] == [7, 7, 0, 3]  # an index tensor is kept by value
    assert gather["meta"]["OUT_DTYPE"] == {"triton_dtype": "fp32"}  # a constexpr mid-signature
    add = kernels["_add_kernel"]["launches"][0]  # under @triton.autotune, a callable grid
    assert add["meta"] == {"BLOCK": 64}
    assert add["grid_table"]['{"BLOCK": 256}'] == [4]  # cdiv(1000, 256), as the lambda says
    seconds = [sum(x["seconds"] for x in k["launches"])
               for k in json.loads(captured["out"].read_text())["kernels"]]
    assert seconds == sorted(seconds, reverse=True) and seconds[-1] > 0  # profile first
    table = captured["capture"].stdout
    assert "share" in table and "tuning saves" in table
    assert "tune them in place: tuner tune --captured" in table


def test_a_config_the_launcher_grid_does_not_fit_is_wrong_and_never_stored(captured):
    from tuner.kernels.captured_launch import captured_kernel
    from tuner.measure.bench import relative_error

    assert os.environ["TRITON_INTERPRET"] == "1"  # tests/conftest.py: launches interpret
    spec = captured_kernel(captured["out"], "_gather_rows_kernel", (ROOT,))
    problem = spec.example_problem
    tensors = spec.make_inputs(problem, "fp32", 0, "cpu")
    expected = spec.reference({k: v.clone() if hasattr(v, "clone") else v
                               for k, v in tensors.items()}, problem)
    spec.launch(tensors, problem, {"BLOCK_SIZE": 16, "num_warps": 4, "num_stages": 2})
    assert spec.outputs is not None
    assert relative_error(spec.outputs(tensors)[0], expected[0]) > 0.1  # 16 of 64 columns
    with sqlite3.connect(captured["db_path"]) as conn:
        best = conn.execute("SELECT kernel, config FROM tuner_best_configs").fetchall()
    assert {k for k, _ in best} == {"_scale_rows_kernel", "_add_kernel", "_gather_rows_kernel"}
    for kernel, config in best:
        if kernel == "_gather_rows_kernel":
            assert json.loads(config)["BLOCK_SIZE"] >= 64


def test_every_captured_problem_is_tuned_in_place(captured):
    tuned = captured["tune"]
    assert tuned.returncode == 0, tuned.stdout[-3000:] + tuned.stderr[-3000:]
    assert tuned.stdout.count("best config:") == 4  # two scale_rows problems, add, gather


def test_the_patched_program_launches_the_tuned_configs_and_stays_correct(captured):
    env = dict(captured["env"], TUNER_BEST_CONFIGS=captured["db"])
    run = subprocess.run([sys.executable, "-c", PATCHED, str(PROGRAM)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]  # the program's own asserts held
    assert "patch on: True" in run.stdout
    assert run.stderr.count(": tuned {") == 4, run.stderr
    off = subprocess.run([sys.executable, "-c", PATCHED, str(PROGRAM)],
                         env=dict(env, TUNER_PATCH="off"), capture_output=True, text=True,
                         timeout=300)
    assert off.returncode == 0 and "patch on: False" in off.stdout
    assert ": tuned {" not in off.stderr


def test_a_kernel_file_outside_the_roots_is_refused(captured, tmp_path):
    env = dict(captured["env"], TUNER_KERNEL_ROOTS=str(captured["out"].parent))
    run = run_cli(["tune", "--captured", str(captured["out"]), "--top", "1", "--trials", "1",
                   "--backend", "interpret", "--db", f"sqlite:///{tmp_path / 'x.db'}"], env)
    assert run.returncode != 0
    assert "outside the allowed kernel roots" in run.stdout + run.stderr
