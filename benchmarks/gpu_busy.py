"""Does the pipelined worker keep its GPU busy? Serial vs pipelined, measured without a GPU.

SIMULATED DEVICE, REAL COMPILES. Each run is a local tuning job (``tuner.app.local``: driver,
database, worker threads, bench process) on the stand-in device ``standin:<kind>``
(``tuner.measure.devices.standin``): every config is compiled by Triton for the kind's target
(``sm_90`` for the H200) on this CPU, in the worker's compile pool or, serially, on the
device's first call;
the device is not real: it is held (a sleep) for the request's timing budget (warm-up +
``rep_ms``, as ``do_bench`` holds a GPU), the run time ``r``. Every run starts with an empty
Triton cache, so every compile is real. All variants of one ``r`` run the same configs (the
random sampler, one seed).

Per run, from the phases the service recorded (``tuner.core.device_time``): GPU-seconds (the
span the job held its device), device-busy fraction, configs per device-hour (trials ÷
GPU-seconds × 3600) and its ratio to the serial worker's in the same run set; median compile
seconds ``c`` (one core) and on-device seconds per trial.

The scaling table for more compile processes is a FORMULA, not a measurement:
configs/device-hour ≈ 3600 · min(1 / (r + l), p / c), busy ≈ r · min(1 / (r + l), p / c),
with ``r``, the serial worker's compile ``c`` (one compile on a free core) and the pipelined
device's per-trial overhead ``l`` (cache load, messages) measured here, for ``p`` compile
processes on ``p`` free cores.

    python benchmarks/gpu_busy.py                     # r = 0.125, 0.25, 0.5 s; p = 0, 1, 2
    python benchmarks/gpu_busy.py --trials 12 --runs 0.125 --out /tmp/busy.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db.session import make_engine
from db.session import session_factory
from tuner.app.local import run_local_job
from tuner.core.settings import Settings
from tuner.core.types import Budget
from tuner.core.types import JobSpec
from tuner.core.types import TimingSettings
from tuner.kernels import resolve_kernel
from tuner.views.jobs import summarise_job

LABEL = ("simulated device (stand-in: held for the timing budget), real Triton compiles for "
         "the target on this CPU")
WARMUP_MS = 25.0


def one_run(kind: str, procs: int, run_s: float, trials: int, seed: int,
            shape: dict[str, int]) -> dict[str, Any]:
    """One local job on ``standin:<kind>`` with ``procs`` compile processes (0: serial)."""
    with tempfile.TemporaryDirectory(prefix="gpu-busy-") as tmp:
        settings = Settings.from_env({**os.environ, "TUNER_CACHE_DIR": f"{tmp}/cache",
                                      "TUNER_DB_URL": f"sqlite:///{tmp}/busy.db",
                                      "TUNER_DATA_DIR": tmp})
        backend = f"standin:{kind}"
        kernel = resolve_kernel("matmul", backend, settings.kernel_roots, isolated=True)
        spec = JobSpec(
            kernel="matmul", problems=[shape], dtype="fp16", backend=backend,
            device_kind=kind, sampler="random", seed=seed, budget=Budget(trials=trials),
            timing=TimingSettings(warmup_ms=WARMUP_MS, rep_ms=run_s * 1000 - WARMUP_MS),
            lookahead=procs + 1 if procs else 0, confirm_top=0, static_check=None,
            transfer=0)
        started = time.perf_counter()
        outcome = run_local_job(spec, kernel, settings)
        wall = time.perf_counter() - started
        engine = make_engine(settings.db_url)
        with session_factory(engine)() as session:
            summary = summarise_job(session, outcome.job_id)
        engine.dispose()
    assert summary is not None and summary.device_time is not None
    dt = summary.device_time
    phases = [ph for _, _, ph in summary.phases]
    measured = len(phases)
    gpu_s = dt.gpu_seconds
    return {
        "compile_procs": procs, "mode": "pipelined" if procs else "serial", "run_s": run_s,
        "trials": measured, "wall_s": wall, "gpu_seconds": gpu_s,
        "busy_fraction": dt.busy_fraction,
        "configs_per_device_hour": measured / gpu_s * 3600 if gpu_s > 0 else None,
        "median_compile_s": dt.medians.get("compile_s"),
        "median_overhead_s": statistics.median(
            (ph["device_s"] or 0.0) - (ph["timing_s"] or 0.0) - (ph["check_s"] or 0.0)
            for ph in phases),
        "on_device_compile_s": sum(w.on_device_compile_s for w in dt.workers),
        "idle_s": sum(w.idle_s for w in dt.workers),
        "cache_hits": dt.cache_hits, "cache_known": dt.cache_known,
    }


def formula(c: float, r: float, overhead: float, p: int) -> dict[str, float]:
    """Configs per device-hour and busy fraction for ``p`` compile processes (a model)."""
    rate = min(1.0 / (r + overhead), p / c) if p > 0 else 1.0 / (c + r + overhead)
    return {"compile_procs": p, "configs_per_device_hour": 3600 * rate, "busy_fraction": r * rate}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="h200", help="GPU kind compiled for (default h200)")
    parser.add_argument("--trials", type=int, default=20, help="configs measured per run")
    parser.add_argument("--runs", default="0.125,0.25,0.5",
                        help="device hold per config r (s), comma-separated")
    parser.add_argument("--procs", default="0,1,2", help="compile processes (0: serial)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", default="M=2048,N=2048,K=2048")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).parent / "results" / "gpu_busy.json")
    args = parser.parse_args(argv)
    try:
        runs = [float(x) for x in args.runs.split(",")]
        procs = [int(x) for x in args.procs.split(",")]
        shape = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    except ValueError as exc:
        print(f"error: bad --runs, --procs or --shape: {exc}", file=sys.stderr)
        return 2
    if 0 not in procs:
        procs = [0, *procs]  # the baseline of every ratio
    os.environ.pop("TRITON_CACHE_DIR", None)  # each run compiles into its own empty cache
    rows = []
    for r in runs:
        for p in procs:
            row = one_run(args.kind, p, r, args.trials, args.seed, shape)
            rows.append(row)
            print(f"  r={r:g}s procs={p}: busy {row['busy_fraction']:.1%}, "
                  f"{row['configs_per_device_hour']:.0f} configs/device-hour", flush=True)
    for row in rows:
        serial = next(x for x in rows if x["run_s"] == row["run_s"] and x["compile_procs"] == 0)
        row["vs_serial"] = row["configs_per_device_hour"] / serial["configs_per_device_hour"]
    # one compile on a free core: the serial worker's (nothing else compiles meanwhile)
    c = statistics.median(x["median_compile_s"] for x in rows if x["compile_procs"] == 0)
    overhead = max(0.0, statistics.median(x["median_overhead_s"] for x in rows
                                          if x["compile_procs"] > 0))
    model = [{"run_s": r, **formula(c, r, overhead, p)} for r in runs for p in (0, 1, 2, 4, 8)]
    print(f"\n{LABEL}; {args.trials} configs per run, matmul {args.shape} fp16 for "
          f"{args.kind}; {os.cpu_count()} cores\n")
    print("measured:")
    print(f"{'r (s)':>6} {'procs':>5} {'busy':>6} {'configs/dev-h':>14} {'vs serial':>9} "
          f"{'compile c (s)':>13} {'GPU-s':>6}")
    for x in rows:
        print(f"{x['run_s']:>6g} {x['compile_procs']:>5} {x['busy_fraction']:>6.1%} "
              f"{x['configs_per_device_hour']:>14.0f} {x['vs_serial']:>8.2f}x "
              f"{x['median_compile_s']:>13.3f} {x['gpu_seconds']:>6.1f}")
    print(f"\nformula (not measured): c = {c:.3f} s, on-device overhead l = {overhead:.3f} s, "
          "p free cores")
    print(f"{'r (s)':>6} {'procs':>5} {'busy':>6} {'configs/dev-h':>14}")
    for m in model:
        print(f"{m['run_s']:>6g} {m['compile_procs']:>5} {m['busy_fraction']:>6.1%} "
              f"{m['configs_per_device_hour']:>14.0f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "label": LABEL, "kind": args.kind, "trials": args.trials, "shape": shape,
        "host": {"cores": os.cpu_count(), "machine": platform.machine(),
                 "python": platform.python_version()},
        "measured": rows,
        "formula": {"note": "a model, not a measurement: 3600*min(1/(r+l), p/c)",
                    "compile_s": c, "overhead_s": overhead, "rows": model}}, indent=1))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
