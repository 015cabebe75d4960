"""Kernels captured from a program, tuned by the fleet (``tuner submit --captured``): a CPU
worker, a scheduler, PostgreSQL and Redis, as a team runs them."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT
from tests.fleet.fleet import Fleet

PROGRAM = ROOT / "tests" / "kernels" / "captured_program.py"


def test_captured_kernels_are_tuned_by_the_fleet(fleet: Fleet, tmp_path) -> None:
    fleet.env["TUNER_KERNEL_ROOTS"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    capture = tmp_path / "capture.json"
    env = dict(fleet.env, TRITON_INTERPRET="1")
    cap = subprocess.run([sys.executable, "-m", "tuner.cli", "capture", "-o", str(capture),
                          "--", sys.executable, str(PROGRAM)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert cap.returncode == 0, cap.stderr[-2000:]
    fleet.start_worker("w1")
    fleet.start_scheduler()
    submitted = fleet.cli("submit", "--captured", str(capture), "--min-share", "0",
                          "--trials", "3", "--backend", "interpret", "--confirm-top", "0")
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    jobs = [int(line.split()[1].rstrip(":")) for line in submitted.stdout.splitlines()
            if line.startswith("job ")]
    assert len(jobs) == 3  # one job per captured kernel (and dtype)
    for job in jobs:
        fleet.wait_finished(job, 300)
        fleet.assert_exactly_once(job)
    best = {r.kernel for r in fleet.rows("SELECT kernel FROM tuner_best_configs")}
    assert best == {"_scale_rows_kernel", "_add_kernel", "_gather_rows_kernel"}
