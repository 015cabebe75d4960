"""No job can end or stall a scheduler: a job whose Optuna studies are missing (its submit was
killed between committing the job and creating them) is repaired, and a kernel whose
description hangs holds back only its own job."""

from __future__ import annotations

import optuna
import pytest

from tests.conftest import FAULT_KERNEL
from tests.conftest import ROOT

pytestmark = pytest.mark.integration
FAST = ["--backend", "interpret", "--rep-ms", "5", "--seed", "0", "--confirm-top", "0"]

HANGING_KERNEL = '''from __future__ import annotations

import time
from pathlib import Path

if Path(__file__).with_name("hang-now").exists():  # appears after the submit described it
    time.sleep(3600)

''' + (ROOT / "examples" / "add_relu_kernel.py").read_text().replace(
    "from __future__ import annotations\n", "")


def test_a_job_whose_studies_are_missing_is_repaired_not_fatal(fleet):
    job = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--shape", "N=2000",
                       "--trials", "2", "--sampler", "grid", *FAST)
    names = [r[0] for r in fleet.rows("SELECT study_name FROM tuner_problems WHERE job_id = :j",
                                      j=job)]
    for name in names:  # as if `tuner submit` had been killed after committing the job
        optuna.delete_study(study_name=name, storage=fleet.db_url)
    fleet.start_worker("w1")
    fleet.start_scheduler()
    fleet.wait_finished(job)
    assert fleet.procs["s1"].poll() is None, fleet.log("s1")[-3000:]
    assert "missing Optuna studies" in fleet.log("s1")
    fleet.assert_exactly_once(job)


def test_a_hanging_kernel_description_holds_back_only_its_job(fleet, tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    kernels.chmod(0o755)
    (kernels / "hanging.py").write_text(HANGING_KERNEL)
    fleet.env["TUNER_KERNEL_ROOTS"] = f"{ROOT}:{kernels}"
    stuck = fleet.submit(f"{kernels / 'hanging.py'}:ADD_RELU", "--shape", "N=1024",
                         "--dtype", "fp32", "--trials", "2", *FAST)
    (kernels / "hang-now").touch()
    moving = fleet.submit(f"{FAULT_KERNEL}:WRONG_RESULT", "--shape", "N=1000", "--trials", "2",
                          "--sampler", "grid", *FAST)
    fleet.start_worker("w1")
    fleet.start_scheduler()
    fleet.wait_finished(moving, timeout_s=120)  # the description's own timeout is 180 s
    assert fleet.job_status(stuck) in ("pending", "running")
    assert fleet.procs["s1"].poll() is None, fleet.log("s1")[-3000:]
    fleet.assert_exactly_once(moving)
