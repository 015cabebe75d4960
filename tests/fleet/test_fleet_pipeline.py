"""A pipelined Celery worker (``tuner worker --compile-procs``) in a real fleet: Redis,
PostgreSQL, a scheduler, and a stand-in GPU (real ``sm_90`` compiles, simulated device
time, ``tuner.measure.devices.standin``)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.fleet.fleet import Fleet
from tuner.app.fleet import submit_job
from tuner.core.settings import Settings
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import resolve_kernel


def _json(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


def test_celery_worker_compiles_ahead_while_the_device_measures(fleet: Fleet) -> None:
    name = "standin@fleet"
    fleet._spawn("w1", ["worker", "--device", "standin:h200", "--compile-procs", "1",
                        "--name", name])
    fleet.wait(lambda: fleet.log("w1").count(" ready.") >= 1, 120, "the worker to be ready")
    fleet.start_scheduler()
    settings = Settings.from_env(fleet.env)
    kernel = resolve_kernel("matmul", "standin:h200", settings.kernel_roots, isolated=True)
    spec = JobSpec(kernel="matmul", problems=[{"M": 512, "N": 512, "K": 512}], dtype="fp16",
                   backend="standin:h200", device_kind="h200", sampler="random", seed=3,
                   budget=Budget(trials=6), timing=TimingSettings(warmup_ms=0, rep_ms=300),
                   lookahead=2, confirm_top=0, static_check=None, transfer=0)
    job = submit_job(spec, kernel, settings).job_id
    fleet.wait_finished(job, 300)
    fleet.assert_exactly_once(job)
    rows = fleet.rows("SELECT phases FROM tuner_trials WHERE job_id = :j AND status = 'ok'",
                      j=job)
    phases = [_json(r.phases) for r in rows]
    assert len(phases) == 6
    assert all(p["pipelined"] and p["worker"] == name for p in phases)
    device = sorted((p["device_start"], p["device_end"]) for p in phases)
    assert all(b[0] >= a[1] - 1e-6 for a, b in itertools.pairwise(device))
    # compiles ran while another trial held the device: the pipeline was full
    ahead = [p for p in phases for q in phases if p is not q
             and p["compile_start"] < q["device_end"] and q["device_start"] < p["compile_end"]]
    assert ahead
    status = fleet.cli("status", str(job))
    assert "device time:" in status.stdout and "busy measuring" in status.stdout
