"""A real library's kernels tuned in place: Liger-Kernel (installed from PyPI by the dev extra,
never vendored) captured from a small training step, its costliest problems tuned on the
interpreter, and the step run again with ``tuner.patch()``, its own checks against torch
holding. Liger's GEGLU calls ``libdevice.tanh`` and its SwiGLU/RMSNorm call ``.to`` on a float
argument: both run on the interpreter through ``tuner.kernels.interpreter_math``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.conftest import run_cli

pytest.importorskip("liger_kernel", reason="Liger-Kernel is not installed (pip install "
                    "liger-kernel; the dev extra installs it, so CI runs this test)")

STEP = ROOT / "tests" / "kernels" / "liger_step.py"
PATCHED = ("import logging, runpy, sys; logging.basicConfig(level=logging.INFO); "
           "from tuner.kernels.interpreter_math import install; install(); import tuner; "
           "tuner.patch(modules=['liger_kernel']); runpy.run_path(sys.argv[1], "
           "run_name='__main__')")


def test_liger_kernels_are_captured_tuned_and_served_in_place(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNER_")}
    env.update(TUNER_DATA_DIR=str(tmp_path / "data"), TRITON_INTERPRET="1", COLUMNS="200",
               TUNER_KERNEL_ROOTS=os.pathsep.join([str(ROOT), str(tmp_path)]))
    out = tmp_path / "liger.json"
    cap = run_cli(["capture", "-o", str(out), "--", sys.executable, str(STEP)], env)
    assert cap.returncode == 0, cap.stderr[-3000:]
    kernels = {k["name"]: k for k in json.loads(out.read_text())["kernels"]}
    assert {"_rms_norm_forward_kernel", "_swiglu_forward_kernel", "_geglu_tanh_forward_kernel",
            "_layer_norm_forward_kernel", "_softmax_single_block_forward_kernel"} <= set(kernels)
    rms = kernels["_rms_norm_forward_kernel"]
    assert rms["module"] == "liger_kernel.ops.rms_norm"
    assert rms["launches"][0]["meta"]["BLOCK_SIZE"] == 64  # Liger's own choice for 64 cols

    db = f"sqlite:///{tmp_path / 'tuned.db'}"
    tuned = run_cli(["tune", "--captured", str(out), "--top", "2", "--trials", "2",
                     "--backend", "interpret", "--db", db], env)
    assert tuned.returncode == 0, tuned.stdout[-3000:] + tuned.stderr[-3000:]
    assert tuned.stdout.count("best config:") == 2

    run = subprocess.run([sys.executable, "-c", PATCHED, str(STEP)],
                         env=dict(env, TUNER_BEST_CONFIGS=db), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]  # Liger's results still match torch
    assert run.stderr.count(": tuned {") == 2, run.stderr[-3000:]
